"""The job lists: a user's or an account's jobs as rows of the report's own figures
(``webapp.report.job_rows``), filtered, sorted and ranked by waste (``job_list``), paged
by the archive's database (``job_page``) and served page by page across clusters
(``my_jobs``)."""
