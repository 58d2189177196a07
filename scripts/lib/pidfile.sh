# Sourced by scripts/dev-stack and scripts/vm-cluster: is the process a pidfile names
# still the one that wrote it?
#
# A daemon killed without removing its pidfile (munged's outlives a stop) leaves a number
# the kernel hands to the next process; `kill -0` alone then finds it running (a stack
# start once skipped munged because its old pid was a shell's, and slurmdbd could not
# authenticate). The process that wrote a pidfile started before the file's last change;
# a pid reused since started after it.

alive() { # alive PIDFILE -> 0 when its pid runs and started before the file was written
  [ -s "$1" ] || return 1
  local pid age written
  pid=$(cat "$1")
  kill -0 "$pid" 2>/dev/null || return 1
  age=$(ps -o etimes= -p "$pid" 2>/dev/null) || return 1
  written=$(stat -c %Y "$1") || return 1
  # etimes is whole seconds: the start it gives is up to a second late.
  [ $(( $(date +%s) - age )) -le $(( written + 1 )) ]
}
