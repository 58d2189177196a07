# Sourced by scripts/dev-stack and scripts/vm-cluster: is the process a pidfile names
# still the daemon that wrote it?
#
# A daemon killed without removing its pidfile (munged's outlives a stop) leaves a number
# the kernel hands to the next process; `kill -0` alone then finds it running (a stack
# start once skipped munged because its old pid was a shell's, and slurmdbd could not
# authenticate). So the process must also bear the daemon's name (its comm), as
# start-stop-daemon's --name checks. Not its start time against the file's: that compared
# two clocks read at different moments, and under load a daemon read as gone (a second
# jobs-exporter was started beside the first, failed to bind, and left its pid behind).

daemon_name() { # daemon_name PIDFILE -> the comm of the daemon it is named for
  local name; name=$(basename "$1" .pid)
  case $name in
    exporter|exporter-*) echo jobs-exporter ;;
    slurmd-*) echo slurmd ;;
    web|web-all) echo gunicorn ;;
    sync) echo jobreport-sync ;;  # dev-stack's loop names itself so
    *) echo "$name" ;;
  esac
}

alive() { # alive PIDFILE [NAME] -> 0 when its pid runs as NAME (default: daemon_name)
  [ -s "$1" ] || return 1
  local pid comm
  pid=$(cat "$1")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
  [ "$comm" = "${2:-$(daemon_name "$1")}" ]
}
