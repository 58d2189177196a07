#!/bin/bash
# Runs as root inside a VM cluster at every boot (jobreport-vm.service in the image), from
# the host's share mounted at /mnt/host: network, users, munge, MariaDB, slurmdbd,
# slurmctld, one slurmd on cgroup v2 under systemd, slurmrestd (JWT), the project's
# jobs-exporter and slurm-exporter installed from its wheel with their deploy/ units.
# Writes out/ready (or out/failed with the reason) for scripts/vm-cluster.
set -euo pipefail
SHARE=/mnt/host
OUT=$SHARE/out
mkdir -p "$OUT"; rm -f "$OUT/ready" "$OUT/failed"
. "$SHARE/vm.env"   # CLUSTER NODE ADDR GATEWAY ALICE_UID BOB_UID SLURMDB_PASS ADMIN_PASS
trap 'echo "line $LINENO: $BASH_COMMAND" > "$OUT/failed"' ERR
log() { echo "[guest-boot $(date +%T)] $*"; }
wait_for() { # wait_for SECONDS WHAT CMD...
  local deadline=$((SECONDS + $1)) what=$2; shift 2
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || { echo "timed out waiting for $what" > "$OUT/failed"; exit 1; }
    sleep 0.5
  done
}

# The network: QEMU's user-mode network, static (no DHCP client in the image). Slurm 24.11
# needs an address other than loopback for the node's name.
hostname "$NODE"; echo "$NODE" > /etc/hostname
ip link set lo up
wait_for 60 "the network interface" test -e /sys/class/net/eth0
ip link set eth0 up
ip addr replace "$ADDR/24" dev eth0; ip route replace default via "$GATEWAY"
grep -q " $NODE\$" /etc/hosts || echo "$ADDR $NODE" >> /etc/hosts
# No resolver can be reached (the network is restricted): without one, a lookup fails at
# once instead of waiting out the resolver debootstrap copied from the host (10 s for every
# slurmrestd request).
echo "# none: the cluster's names are in /etc/hosts (jobreport scripts/vm-cluster)" > /etc/resolv.conf

install -d -m 700 /root/.ssh
install -m 600 "$SHARE/authorized_keys" /root/.ssh/authorized_keys

# The same users as the host's stack, same uids.
id alice >/dev/null 2>&1 || useradd --create-home --uid "$ALICE_UID" --shell /bin/bash alice
id bob >/dev/null 2>&1 || useradd --create-home --uid "$BOB_UID" --shell /bin/bash bob
id slurmrestd >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin slurmrestd
id slurm-exporter >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin slurm-exporter
# The scratch file system: the second disk, throttled by QEMU (scripts/vm-cluster).
mkdir -p /scratch
mountpoint -q /scratch || mount -o noatime /dev/vdb /scratch
chmod 1777 /scratch

# Configuration files from the share.
install -d /etc/slurm
install -m 644 "$SHARE/etc/slurm.conf" "$SHARE/etc/cgroup.conf" "$SHARE/etc/gres.conf" /etc/slurm/
install -m 600 -o slurm -g slurm "$SHARE/etc/slurmdbd.conf" /etc/slurm/
install -d -o slurm -g slurm /var/lib/slurm/slurmctld /var/lib/slurm/slurmd /var/log/slurm
[ -s /etc/munge/munge.key ] || { dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 2>/dev/null; }
chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
JWT_KEY=/var/lib/slurm/slurmctld/jwt_hs256.key
[ -s "$JWT_KEY" ] || dd if=/dev/urandom of="$JWT_KEY" bs=32 count=1 2>/dev/null
chown slurm:slurm "$JWT_KEY"; chmod 600 "$JWT_KEY"
# Fake GPUs: character devices Slurm allocates and constrains (no driver behind them).
for i in 0 1; do [ -e /dev/fakegpu$i ] || mknod -m 666 /dev/fakegpu$i c 195 $i; done
mkdir -p /run/jobs-exporter/gpus
install -d /opt/jobreport/deploy
install -m 755 "$SHARE"/deploy/*.sh /opt/jobreport/deploy/

install -m 644 "$SHARE"/units/*.service /etc/systemd/system/
install -d /etc/systemd/system/slurmrestd.service.d
install -m 644 "$SHARE/units/slurmrestd-override.conf" /etc/systemd/system/slurmrestd.service.d/jobreport.conf
install -m 644 "$SHARE/etc/default-jobs-exporter" /etc/default/jobs-exporter
install -m 644 "$SHARE/etc/default-slurm-exporter" /etc/default/slurm-exporter
install -m 644 "$SHARE/etc/mariadb.cnf" /etc/mysql/mariadb.conf.d/90-jobreport.cnf
# Debian's libmariadb3 11.8.9 (trixie and testing) fails slurmdbd 24.11 and 26.05 at start
# ("mysql_query failed: 5027 Number of columns in result (=1) set execeeds maxmimum allowed
# number of columns (=0)" on its first query); the 10.11 client library of Debian 12 works
# with the same server. slurmdbd alone loads it.
install -d /opt/jobreport/compat
install -m 644 "$SHARE/compat/libmariadb.so.3" /opt/jobreport/compat/
install -d /etc/systemd/system/slurmdbd.service.d
printf '[Service]\nEnvironment=LD_LIBRARY_PATH=/opt/jobreport/compat\n' \
  > /etc/systemd/system/slurmdbd.service.d/jobreport-libmariadb.conf
systemctl daemon-reload

log "starting munge and MariaDB"
systemctl start munge mariadb
mariadb -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$SLURMDB_PASS';
  GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
  CREATE USER IF NOT EXISTS 'jobreport_admin'@'$GATEWAY' IDENTIFIED BY '$ADMIN_PASS';
  GRANT ALL ON *.* TO 'jobreport_admin'@'$GATEWAY' WITH GRANT OPTION;"
log "starting slurmdbd"
systemctl start slurmdbd
wait_for 120 "slurmdbd" sacctmgr -n show cluster
sacctmgr -n -P show cluster format=cluster | grep -qx "$CLUSTER" || sacctmgr -i add cluster "$CLUSTER" >/dev/null
existing=$(sacctmgr -n -P show account format=account)
for acct in research teaching; do
  grep -qx "$acct" <<<"$existing" || sacctmgr -i add account "$acct" cluster="$CLUSTER" Description="$acct" Organization=demo >/dev/null
done
users=$(sacctmgr -n -P show user format=user)
grep -qx alice <<<"$users" || sacctmgr -i add user alice account=research cluster="$CLUSTER" >/dev/null
grep -qx bob <<<"$users" || sacctmgr -i add user bob account=teaching cluster="$CLUSTER" >/dev/null
grep -qx root <<<"$users" || sacctmgr -i add user root account=research cluster="$CLUSTER" >/dev/null

log "starting slurmctld and slurmd"
systemctl start slurmctld
wait_for 120 "slurmctld" scontrol ping
systemctl start slurmd
node_ready() { sinfo -h -N -o '%T' | grep -Eq '^(idle|mixed|allocated)'; }
wait_for 120 "the node" node_ready
# The project, from the wheel the host built (its own dependencies are Debian's), which a
# guest booted before the host's venv existed waits for (vm-cluster boot --wheel-later;
# its stamp comes last). Not byte-compiled: the guest runs only the two exporters, and
# compiling the whole wheel under emulation took 10.5 CPU-seconds against 7 (the
# exporters compile their few modules when they start).
wait_for 600 "the host's wheel" test -s "$SHARE/wheel/stamp"
log "installing $(basename "$SHARE"/wheel/*.whl)"
/opt/jobreport/venv/bin/pip install -q --no-index --no-deps --force-reinstall --no-compile \
  --disable-pip-version-check "$SHARE"/wheel/*.whl
systemctl start slurmrestd jobs-exporter slurm-exporter
wait_for 60 "slurmrestd" curl -s -o /dev/null http://127.0.0.1:6820/openapi/v3
wait_for 60 "jobs-exporter" curl -sf -o /dev/null http://127.0.0.1:9306/metrics
wait_for 60 "slurm-exporter" curl -sf -o /dev/null http://127.0.0.1:9089/metrics
# A token for SlurmUser (sees every job) for the host's jobreport.
(umask 077; scontrol token username=slurm lifespan=2592000 | sed 's/^SLURM_JWT=//' > "$OUT/slurmrestd.jwt")
scontrol --version > "$OUT/version"
log "ready"
date +%s > "$OUT/ready"
