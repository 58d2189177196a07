-- One UNION ALL branch of jobreport.jobs per cluster. NO_VAL (4294967294) array/het ids
-- become NULL so callers never compare against Slurm's sentinels. The QoS is the one the
-- job ran under, by name: NULL for none (id_qos 0); a QoS deleted since keeps its name.
SELECT
  '{cluster}' AS cluster,
  j.job_db_inx AS job_db_inx,
  j.id_job AS job_id,
  NULLIF(NULLIF(j.id_array_job, 0), 4294967294) AS array_job_id,
  NULLIF(j.id_array_task, 4294967294) AS array_task_id,
  NULLIF(NULLIF(j.het_job_id, 0), 4294967294) AS het_job_id,
  NULLIF(j.het_job_offset, 4294967294) AS het_job_offset,
  j.id_user AS uid,
  a.user AS user,
  j.account AS account,
  j.`partition` AS `partition`,
  j.job_name AS job_name,
  j.state AS state,
  j.exit_code AS exit_code,
  j.time_submit AS submit_time,
  j.time_start AS start_time,
  j.time_end AS end_time,
  j.cpus_req AS cpus,
  j.mem_req AS mem_req,
  j.timelimit AS timelimit,
  j.nodelist AS nodelist,
  j.work_dir AS work_dir,
  j.tres_alloc AS tres_alloc,
  j.tres_req AS tres_req,
  q.name AS qos
FROM `{acct_db}`.`{cluster}_job_table` AS j
LEFT JOIN `{acct_db}`.`{cluster}_assoc_table` AS a ON a.id_assoc = j.id_assoc
LEFT JOIN `{acct_db}`.`qos_table` AS q ON q.id = j.id_qos
WHERE j.deleted = 0
