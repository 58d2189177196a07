#!/usr/bin/env bash
# vm/image.sh SUITE OUT — the root filesystem of one VM cluster, built once and cached by
# scripts/vm-cluster under a hash of this file and SUITE (a change here rebuilds it).
# It holds Debian's own packages only; everything of the project (its wheel, the Slurm
# configuration, the boot steps) comes from the host's share at every boot
# (scripts/vm/guest-boot.sh), so a code change never rebuilds an image.
# OUT receives vmlinuz, initrd.img and root.img (ext4, sparse).
set -euo pipefail
SUITE=$1 OUT=$2
MIRROR=${JOBREPORT_VM_MIRROR:-http://deb.debian.org/debian}
PACKAGES=systemd,systemd-sysv,linux-image-amd64,udev,iproute2,dbus,procps,kmod,python3,python3-venv,python3-prometheus-client,python3-pymysql,openssh-server,slurm-wlm,slurmdbd,slurmrestd,slurm-wlm-jwt-plugin,munge,mariadb-server,curl
ROOTFS="$OUT/rootfs"
rm -rf "$ROOTFS" && mkdir -p "$ROOTFS"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOTFS" "$MIRROR" >"$OUT/debootstrap.log" 2>&1 \
  || { tail -20 "$OUT/debootstrap.log" >&2; exit 1; }
in_root() { chroot "$ROOTFS" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
# The daemons start in guest-boot.sh's order, once their configuration is written.
in_root systemctl disable munge mariadb slurmd slurmctld slurmdbd slurmrestd >/dev/null 2>&1 || true
in_root systemctl mask apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer \
  systemd-timesyncd.service >/dev/null 2>&1 || true
cat > "$ROOTFS/etc/systemd/system/jobreport-vm.service" <<'UNIT'
[Unit]
Description=jobreport VM cluster: configure and start from the host's share
After=local-fs.target systemd-udevd.service
Wants=systemd-udevd.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'mkdir -p /mnt/host && mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 host /mnt/host && exec /bin/bash /mnt/host/guest-boot.sh'
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
UNIT
in_root systemctl enable jobreport-vm.service >/dev/null 2>&1
echo '/dev/vda / ext4 rw,relatime 0 1' > "$ROOTFS/etc/fstab"
# A Python environment for the project's wheel (installed at boot, --no-deps: its exporters
# need only prometheus_client, db-setup only PyMySQL, both Debian's).
in_root python3 -m venv --system-site-packages /opt/jobreport/venv
in_root apt-get clean
rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/debconf/*-old
cp -L "$ROOTFS"/boot/vmlinuz-* "$OUT/vmlinuz"
cp -L "$ROOTFS"/boot/initrd.img-* "$OUT/initrd.img"
chroot "$ROOTFS" dpkg-query -W -f='${Package} ${Version}\n' slurmctld linux-image-amd64 systemd \
  mariadb-server python3 > "$OUT/versions"
rm -f "$OUT/root.img"
truncate -s 6G "$OUT/root.img"
mkfs.ext4 -q -F -L root -d "$ROOTFS" "$OUT/root.img"
rm -rf "$ROOTFS"
