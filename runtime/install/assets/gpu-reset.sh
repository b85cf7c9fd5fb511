#!/bin/sh
# Resets one GPU; run by the janitor's privileged reset Job on the GPU's node
# (seed 001 "Execute GPU Reset"). Usage: gpu-reset.sh <GPU-UUID>
# (or GPU_UUID in the environment). Exit codes, read by the GPUReset
# controller (actors/janitor/gpu_reset_plan.hpp):
#   0  reset and healthy
#   2  the reset command failed
#   3  the health check after the reset failed
#   4  the GPU could not be queried or prepared before the reset (its compute
#      processes could not be listed, or persistence mode could not be read
#      or set); nothing was reset
#   5  a process still holds the GPU (a compute app the device plugin does
#      not know about, seed 000 §3.1); nothing was reset
#   64 usage
# Every failure writes "GPU reset failed: <UUID>: <why>" to the kernel log;
# the agent turns the kmsg line "GPU reset occurred: <UUID>" into a healthy
# event. NVIDIA_SMI and KMSG override the nvidia-smi binary and /dev/kmsg.
set -u

NVIDIA_SMI=${NVIDIA_SMI:-nvidia-smi}
KMSG=${KMSG:-/dev/kmsg}
uuid=${1:-${GPU_UUID:-}}

log() {
  printf '%s gpu-reset: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*"
}

# One line to the kernel log, where the agent's XID monitor reads it.
kmsg() {
  if ! printf '%s\n' "$*" >"$KMSG" 2>/dev/null; then
    log "could not write to $KMSG: $*"
  fi
}

fail() {
  code=$1
  shift
  log "failed: $*"
  kmsg "GPU reset failed: $uuid: $*"
  exit "$code"
}

case $uuid in
  GPU-????????-????-????-????-????????????) ;;
  *)
    log "usage: gpu-reset.sh <GPU-UUID> (got '$uuid')"
    exit 64
    ;;
esac

# 0. Nothing may still hold the GPU. The GPU operator's operands are gone
# (workflow step 1), but a pod that got this GPU through NVIDIA_VISIBLE_DEVICES
# or a hostPath, or a process outside Kubernetes, is invisible to the device
# plugin (seed 000 §3.1). Refuse before touching anything, naming the pids,
# rather than let the reset fail on a busy GPU or pull it from under them.
apps=$("$NVIDIA_SMI" --query-compute-apps=pid,process_name,gpu_uuid --format=csv,noheader \
  -i "$uuid" 2>&1) \
  || fail 4 "cannot list compute processes: $(printf '%s' "$apps" | head -n 3 | tr '\n' ' ')"
apps=$(printf '%s\n' "$apps" | grep -v '^[[:space:]]*$' | grep -v '^No running processes found')
if [ -n "$apps" ]; then
  holders=$(printf '%s\n' "$apps" | awk -F', *' '{ printf "%s%s (%s)", sep, $1, $2; sep = ", " }')
  fail 5 "GPU in use, not reset: pids $holders"
fi

# 1. Persistence mode off, remembering whether it was on.
persistence=$("$NVIDIA_SMI" --query-gpu=persistence_mode --format=csv,noheader -i "$uuid" 2>&1) \
  || fail 4 "cannot read persistence mode: $persistence"
persistence=$(printf '%s' "$persistence" | tr -d '[:space:]')
log "persistence mode of $uuid: $persistence"
if [ "$persistence" = "Enabled" ]; then
  out=$("$NVIDIA_SMI" -i "$uuid" -pm 0 2>&1) || fail 4 "cannot disable persistence mode: $out"
fi

restore_persistence() {
  if [ "$persistence" = "Enabled" ]; then
    pm_out=$("$NVIDIA_SMI" -i "$uuid" -pm 1 2>&1) \
      || log "cannot re-enable persistence mode: $pm_out"
  fi
}

# 2. The reset.
log "resetting $uuid"
if ! out=$("$NVIDIA_SMI" --gpu-reset -i "$uuid" 2>&1); then
  restore_persistence
  fail 2 "nvidia-smi --gpu-reset: $(printf '%s' "$out" | tr '\n' ' ')"
fi
log "$out"

# 3. Health check: the GPU answers a full query and reports no pending
# retirement or remapping failure.
if ! out=$("$NVIDIA_SMI" -q -i "$uuid" 2>&1); then
  restore_persistence
  fail 3 "health check: nvidia-smi -q: $(printf '%s' "$out" | head -n 3 | tr '\n' ' ')"
fi
if printf '%s\n' "$out" | grep -Eq 'Remapping Failure Occurred[[:space:]]*:[[:space:]]*Yes|Pending Page Blacklist[[:space:]]*:[[:space:]]*Yes'; then
  restore_persistence
  fail 3 "health check: row remapping failure or pending page retirement"
fi

# 4. Persistence mode back as it was.
restore_persistence

# 5. Report.
log "GPU reset occurred: $uuid"
kmsg "GPU reset occurred: $uuid"
exit 0
