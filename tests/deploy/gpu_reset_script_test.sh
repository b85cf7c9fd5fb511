#!/usr/bin/env bash
# runtime/install/assets/gpu-reset.sh against a fake nvidia-smi on PATH: the order of
# its calls, its exit codes (the GPUReset controller reads them) and its
# kernel-log lines (the agent reads them). Run as the reset Job runs it,
# `/bin/sh gpu-reset.sh <UUID>`, under every POSIX shell found here (sh, dash,
# bash, busybox sh), so no bashism slips in. No GPU, no network.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
script=$root/runtime/install/assets/gpu-reset.sh
uuid=GPU-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/bin"

# The fake records one tag per call to $FAKE_LOG (the test's view of the
# order) and answers as the FAKE_* variables say.
cat >"$work/bin/nvidia-smi" <<'EOF'
#!/bin/sh
args=" $* "
case $args in
  *" -i $FAKE_UUID "*) ;;
  *) echo "no-uuid: $*" >>"$FAKE_LOG"; exit 99 ;;
esac
case $args in
  *" --query-compute-apps=pid,process_name,gpu_uuid --format=csv,noheader "*)
    echo apps >>"$FAKE_LOG"
    [ -n "${FAKE_APPS:-}" ] && printf '%s\n' "$FAKE_APPS"
    exit "${FAKE_APPS_RC:-0}" ;;
  *" --query-gpu=persistence_mode --format=csv,noheader "*)
    echo pm-read >>"$FAKE_LOG"
    printf '%s\n' "${FAKE_PM:-Disabled}"
    exit "${FAKE_PM_RC:-0}" ;;
  *" -pm 0 "*)
    echo pm-off >>"$FAKE_LOG"
    exit "${FAKE_PM_OFF_RC:-0}" ;;
  *" -pm 1 "*)
    echo pm-on >>"$FAKE_LOG"
    exit 0 ;;
  *" --gpu-reset "*)
    echo reset >>"$FAKE_LOG"
    if [ "${FAKE_RESET_RC:-0}" -ne 0 ]; then
      echo "Unable to reset this GPU because it's being used by some other process"
      exit "$FAKE_RESET_RC"
    fi
    echo "GPU 00000000:3B:00.0 was successfully reset."
    exit 0 ;;
  *" -q "*)
    echo query >>"$FAKE_LOG"
    printf '%s\n' "${FAKE_Q_OUT:-    Remapping Failure Occurred        : No}"
    exit "${FAKE_Q_RC:-0}" ;;
esac
echo "unknown: $*" >>"$FAKE_LOG"
exit 98
EOF
chmod +x "$work/bin/nvidia-smi"

# The POSIX shells to run the script under, each once.
shells=()
seen=" "
for candidate in sh dash bash "busybox sh"; do
  read -r -a word <<<"$candidate"
  path=$(command -v "${word[0]}" || true)
  [ -n "$path" ] || continue
  if [ "${word[0]}" = busybox ]; then
    "$path" sh -c true 2>/dev/null || continue
  fi
  key=$(readlink -f "$path")${word[1]:+ ${word[1]}}
  case $seen in *" $key "*) continue ;; esac
  seen="$seen$key "
  shells+=("$path${word[1]:+ ${word[1]}}")
done

failures=0
shell=
rc=0
out=
calls=
kmsg_text=

# run ENV=VALUE... -- ARGS...: the script under $shell with the fake first on
# PATH and KMSG a file; sets rc, out (stdout+stderr), calls and kmsg_text.
run() {
  local env=()
  while [ "$1" != -- ]; do
    env+=("$1")
    shift
  done
  shift
  : >"$work/calls"
  : >"$work/kmsg"
  rc=0
  # shellcheck disable=SC2086 # $shell may be "busybox sh"
  out=$(env -u NVIDIA_SMI -u GPU_UUID PATH="$work/bin:$PATH" KMSG="$work/kmsg" \
    FAKE_LOG="$work/calls" FAKE_UUID="$uuid" "${env[@]}" $shell "$script" "$@" 2>&1) \
    || rc=$?
  calls=$(tr '\n' ' ' <"$work/calls" | sed 's/ $//')
  kmsg_text=$(cat "$work/kmsg")
}

fail() {
  echo "FAIL [$shell] $case_name: $*"
  echo "  exit $rc; calls: $calls"
  echo "  kmsg: $kmsg_text"
  printf '%s\n' "$out" | sed 's/^/  | /'
  failures=$((failures + 1))
}

expect() { # expect RC "CALLS" [KMSG-SUBSTRING]
  [ "$rc" -eq "$1" ] || fail "exit $rc, want $1"
  [ "$calls" = "$2" ] || fail "calls '$calls', want '$2'"
  if [ -n "${3:-}" ]; then
    case $kmsg_text in *"$3"*) ;; *) fail "kmsg lacks '$3'" ;; esac
  fi
}

expect_out() { # expect_out SUBSTRING
  case $out in *"$1"*) ;; *) fail "output lacks '$1'" ;; esac
}

for shell in "${shells[@]}"; do
  case_name="persistence Enabled: off, reset, health check, back on"
  run FAKE_PM=Enabled -- "$uuid"
  expect 0 "apps pm-read pm-off reset query pm-on" "GPU reset occurred: $uuid"
  [ "$kmsg_text" = "GPU reset occurred: $uuid" ] || fail "kmsg '$kmsg_text'"

  case_name="persistence Disabled: left alone"
  run FAKE_PM=Disabled -- "$uuid"
  expect 0 "apps pm-read reset query" "GPU reset occurred: $uuid"

  case_name="UUID from GPU_UUID"
  run GPU_UUID="$uuid" --
  expect 0 "apps pm-read reset query" "GPU reset occurred: $uuid"

  case_name="the reset command fails: exit 2, persistence restored, no health check"
  run FAKE_PM=Enabled FAKE_RESET_RC=1 -- "$uuid"
  expect 2 "apps pm-read pm-off reset pm-on" "GPU reset failed: $uuid:"
  expect_out "being used by some other process"
  case $kmsg_text in *"GPU reset occurred"*) fail "reported a reset" ;; esac

  case_name="the health check fails: exit 3, persistence restored"
  run FAKE_PM=Enabled FAKE_Q_RC=15 FAKE_Q_OUT="Unable to determine the device handle" \
    -- "$uuid"
  expect 3 "apps pm-read pm-off reset query pm-on" "GPU reset failed: $uuid: health check"
  case $kmsg_text in *"GPU reset occurred"*) fail "reported a reset" ;; esac

  case_name="the health check finds a row-remapping failure: exit 3"
  run FAKE_PM=Disabled FAKE_Q_OUT="        Remapping Failure Occurred        : Yes" \
    -- "$uuid"
  expect 3 "apps pm-read reset query" "row remapping failure"

  case_name="persistence mode unreadable: exit 4, no reset"
  run FAKE_PM="Unable to determine the device handle" FAKE_PM_RC=15 -- "$uuid"
  expect 4 "apps pm-read" "GPU reset failed: $uuid: cannot read persistence mode"

  case_name="persistence mode cannot be disabled: exit 4, no reset"
  run FAKE_PM=Enabled FAKE_PM_OFF_RC=1 -- "$uuid"
  expect 4 "apps pm-read pm-off" "cannot disable persistence mode"

  case_name="compute processes cannot be listed: exit 4, no reset"
  run FAKE_APPS="Unable to determine the device handle" FAKE_APPS_RC=15 -- "$uuid"
  expect 4 "apps" "GPU reset failed: $uuid: cannot list compute processes"

  case_name="a process still holds the GPU: exit 5, never reset"
  run FAKE_PM=Enabled FAKE_APPS="4242, python3, $uuid
4343, /usr/bin/stress, $uuid" -- "$uuid"
  expect 5 "apps" "GPU reset failed: $uuid: GPU in use"
  expect_out "pids 4242 (python3), 4343 (/usr/bin/stress)"
  case $kmsg_text in *"4242 (python3), 4343 (/usr/bin/stress)"*) ;;
    *) fail "kmsg does not name the pids" ;; esac

  case_name="no compute processes (blank line): reset goes ahead"
  run FAKE_APPS=" " -- "$uuid"
  expect 0 "apps pm-read reset query" "GPU reset occurred: $uuid"

  case_name="usage: no UUID: exit 64, nvidia-smi never called"
  run --
  expect 64 ""
  expect_out "usage: gpu-reset.sh <GPU-UUID>"
  [ -z "$kmsg_text" ] || fail "kmsg written"

  case_name="usage: not a GPU UUID: exit 64"
  run -- GPU-not-a-uuid
  expect 64 ""
  run -- "MIG-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"
  expect 64 ""

  case_name="kmsg not writable: the reset still succeeds, the log says so"
  run KMSG="$work/no-such-dir/kmsg" FAKE_PM=Disabled -- "$uuid"
  expect 0 "apps pm-read reset query"
  expect_out "could not write to $work/no-such-dir/kmsg: GPU reset occurred: $uuid"
done

# NVIDIA_SMI overrides the binary (the fake, by absolute path, PATH without it).
case_name="NVIDIA_SMI"
shell="sh"
: >"$work/calls"
rc=0
out=$(env -u GPU_UUID NVIDIA_SMI="$work/bin/nvidia-smi" KMSG="$work/kmsg" \
  FAKE_LOG="$work/calls" FAKE_UUID="$uuid" sh "$script" "$uuid" 2>&1) || rc=$?
calls=$(tr '\n' ' ' <"$work/calls" | sed 's/ $//')
kmsg_text=$(cat "$work/kmsg")
expect 0 "apps pm-read reset query"

if [ "$failures" -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "gpu_reset_script_test: all cases passed under:$seen"
