#!/usr/bin/env bash
# git-push-gate.sh — a `git` wrapper that refuses `git push` unless mnemos says the push is
# authorized (`mnemos gate verify push`: exit 0 authorized, 1 blocked/pending/expired, 2 no gate).
# Every other git command passes straight through. See docs/git-push-gate.md.
#
# Install it one of two ways:
#   1. As a shell function (bash): add `source /path/to/git-push-gate.sh` to ~/.bashrc.
#   2. As an executable named `git` early in PATH (any shell, also scripts and IDEs):
#        ln -s /path/to/git-push-gate.sh ~/.local/bin/git   # with ~/.local/bin first in PATH
#
# Settings (environment variables):
#   MNEMOS_BIN              how to run mnemos, split on spaces (default: mnemos)
#   MNEMOS_GATE_ACTION      the gate's action (default: push)
#   MNEMOS_GATE_NAMESPACE   the gate's namespace (default: the repository's directory name)
#   MNEMOS_GATE_CONSUME     1: each authorization lets exactly one push through (default: 0)
#   MNEMOS_DATA_DIR         the data directory, as for every mnemos command
#   MNEMOS_GATE_DISABLE     1: do not check (an escape hatch; say so in your commit log)

# The first argument that is not a global git option (values of -C/-c/--git-dir... skipped).
__mnemos_gate_subcommand() {
  while [ "$#" -gt 0 ]; do
    case "$1" in
      -C | -c | --git-dir | --work-tree | --namespace | --exec-path | --config-env) shift 2 ;;
      --) return 1 ;;
      -*) shift ;;
      *) printf '%s\n' "$1"; return 0 ;;
    esac
  done
  return 1
}

# The directory git will run in (honours -C).
__mnemos_gate_directory() {
  local dir="$PWD"
  while [ "$#" -gt 0 ]; do
    case "$1" in
      -C) dir="$2"; shift 2 ;;
      -c | --git-dir | --work-tree | --namespace | --exec-path | --config-env) shift 2 ;;
      -*) shift ;;
      *) break ;;
    esac
  done
  printf '%s\n' "$dir"
}

# Asks mnemos; returns 0 when the push may proceed. $1 is the real git, the rest git's arguments.
__mnemos_gate_check() {
  local real_git="$1"; shift
  [ "${MNEMOS_GATE_DISABLE:-0}" = 1 ] && { echo "git-push-gate: check disabled (MNEMOS_GATE_DISABLE=1)" >&2; return 0; }
  local dir top namespace action output code
  local -a mnemos
  dir="$(__mnemos_gate_directory "$@")"
  top="$("$real_git" -C "$dir" rev-parse --show-toplevel 2>/dev/null)" || top="$dir"
  namespace="${MNEMOS_GATE_NAMESPACE:-$(basename "$top")}"
  action="${MNEMOS_GATE_ACTION:-push}"
  read -r -a mnemos <<< "${MNEMOS_BIN:-mnemos}"
  local -a verify=(gate verify "$action" --namespace "$namespace")
  [ "${MNEMOS_GATE_CONSUME:-0}" = 1 ] && verify+=(--consume)
  output="$("${mnemos[@]}" "${verify[@]}" 2>&1)"
  code=$?
  case "$code" in
    0)
      echo "git-push-gate: $output" >&2
      return 0 ;;
    2)
      echo "git-push-gate: push refused: no '$action' gate in namespace '$namespace'." >&2
      echo "  An agent authorizes it after the checks pass (gate_set), or by hand:" >&2
      echo "  mnemos gate set $action --status authorized --namespace '$namespace' --reason 'tests green'" >&2 ;;
    127)
      echo "git-push-gate: push refused: cannot run mnemos ('${MNEMOS_BIN:-mnemos}'): $output" >&2 ;;
    *)
      echo "git-push-gate: push refused: $output" >&2
      echo "  Fix what the gate says (run the tests, squash the history), then have it authorized again." >&2 ;;
  esac
  return 1
}

# The real git: the first `git` in PATH that is not this script.
__mnemos_gate_real_git() {
  local self candidate dir
  self="$(readlink -f "${BASH_SOURCE[0]}")"
  local IFS=:
  for dir in $PATH; do
    candidate="${dir:-.}/git"
    if [ -x "$candidate" ] && [ ! -d "$candidate" ] && [ "$(readlink -f "$candidate")" != "$self" ]; then
      printf '%s\n' "$candidate"
      return 0
    fi
  done
  return 1
}

if [ "${BASH_SOURCE[0]}" != "$0" ]; then
  # Sourced: define a `git` function for this shell.
  git() {
    if [ "$(__mnemos_gate_subcommand "$@")" = push ]; then
      __mnemos_gate_check "$(type -P git)" "$@" || return 1
    fi
    command git "$@"
  }
else
  # Run as `git`: find the real one, check pushes, then hand over.
  real_git="$(__mnemos_gate_real_git)" || { echo "git-push-gate: no real git found in PATH" >&2; exit 127; }
  if [ "$(__mnemos_gate_subcommand "$@")" = push ]; then
    __mnemos_gate_check "$real_git" "$@" || exit 1
  fi
  exec "$real_git" "$@"
fi
