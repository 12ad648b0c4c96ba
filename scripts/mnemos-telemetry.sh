# mnemos terminal telemetry for bash and zsh.
#
# Source it from ~/.bashrc or ~/.zshrc:   . /path/to/mnemos/scripts/mnemos-telemetry.sh
#
# After every command line, its text, exit code and working directory are POSTed to the daemon's
# /terminal/telemetry (in the background, at most 1 s, silently; nothing happens when the daemon
# is down). Prefix a command with `mnemos_run` (`mnemos_run make test`) to send the last 4 KiB of
# its output too: shell hooks cannot see output otherwise.
# Agents read the result as the MCP resource memory://terminal/recent (the daemon keeps the last
# 200 commands in memory only).
#
#   MNEMOS_URL       the daemon (default http://127.0.0.1:7437)
#   MNEMOS_DATA_DIR  its data directory: each report carries the bearer token in its `token` file,
#                    which the daemon wants on loopback too (default, as for every mnemos command:
#                    $XDG_DATA_HOME/mnemos, else ~/.local/share/mnemos)
#   MNEMOS_TOKEN     the token itself instead (a daemon on another machine)
#   MNEMOS_TELEMETRY_OFF=1   pause reporting in this shell
# Needs curl.

__mnemos_json() { # $1 as a JSON string literal
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\r'/\\r}
  s=${s//$'\t'/\\t}
  s=$(printf '%s' "$s" | LC_ALL=C tr -d '\000-\010\013\014\016-\037\177')
  printf '"%s"' "$s"
}

__mnemos_token() { # the bearer token: $MNEMOS_TOKEN, else the data directory's token file (read anew each time)
  if [ -n "$MNEMOS_TOKEN" ]; then
    printf '%s' "$MNEMOS_TOKEN"
    return 0
  fi
  local dir token=
  if [ -n "$MNEMOS_DATA_DIR" ]; then
    dir=$MNEMOS_DATA_DIR
  elif [ -n "$XDG_DATA_HOME" ] && [ "${XDG_DATA_HOME#/}" != "$XDG_DATA_HOME" ]; then
    dir=$XDG_DATA_HOME/mnemos # a relative $XDG_DATA_HOME is ignored, as the XDG spec says
  else
    dir=$HOME/.local/share/mnemos
  fi
  [ -r "$dir/token" ] || return 0
  IFS= read -r token < "$dir/token" # the file has no final newline: read fails, the variable is set
  printf '%s' "$token"
}

__mnemos_post() { # command exit_code cwd [output_tail]
  [ -n "$MNEMOS_TELEMETRY_OFF" ] && return 0
  command -v curl >/dev/null 2>&1 || return 0
  local body
  body="{\"command\":$(__mnemos_json "$1"),\"exit_code\":$2,\"cwd\":$(__mnemos_json "$3"),\"session\":$(__mnemos_json "${__mnemos_shell}-$$")"
  [ -n "$4" ] && body="$body,\"output_tail\":$(__mnemos_json "$4")"
  body="$body}"
  local auth="" token
  token=$(__mnemos_token)
  [ -n "$token" ] && auth="authorization: Bearer $token"
  # The header goes through a here-string file descriptor, so the token never shows in `ps`.
  (printf '%s' "$body" | curl -s -o /dev/null --max-time 1 -H 'content-type: application/json' \
    ${auth:+-H @/dev/fd/3} --data-binary @- "${MNEMOS_URL:-http://127.0.0.1:7437}/terminal/telemetry" \
    3<<<"$auth" >/dev/null 2>&1 &)
}

mnemos_run() { # runs "$@" showing its output; the report of this line carries the output's last 4 KiB
  local out code
  out=$(mktemp "${TMPDIR:-/tmp}/mnemos-run.XXXXXX") || return 1
  "$@" 2>&1 | tee "$out"
  code=${PIPESTATUS[0]:-${pipestatus[1]}}
  __mnemos_tail=$(tail -c 4096 "$out")
  rm -f "$out"
  return "$code"
}

if [ -n "$ZSH_VERSION" ]; then
  __mnemos_shell=zsh
  __mnemos_preexec() { __mnemos_cmd=$1; }
  __mnemos_precmd() {
    local code=$?
    [ -n "$__mnemos_cmd" ] && __mnemos_post "$__mnemos_cmd" "$code" "$PWD" "$__mnemos_tail"
    __mnemos_cmd=
    __mnemos_tail=
  }
  autoload -Uz add-zsh-hook
  add-zsh-hook preexec __mnemos_preexec
  add-zsh-hook precmd __mnemos_precmd
elif [ -n "$BASH_VERSION" ]; then
  __mnemos_shell=bash
  __mnemos_last=$(HISTTIMEFORMAT= builtin history 1 | awk '{print $1}')
  __mnemos_precmd() {
    local code=$? entry number
    entry=$(HISTTIMEFORMAT= builtin history 1)
    number=${entry%%[^ 0-9]*}; number=${number// /}
    # Only a new history entry is a new command (an empty line or Ctrl-C leaves it unchanged).
    if [ -n "$number" ] && [ "$number" != "$__mnemos_last" ]; then
      __mnemos_last=$number
      entry=${entry#*[0-9] }
      entry=${entry#"${entry%%[! ]*}"}
      __mnemos_post "$entry" "$code" "$PWD" "$__mnemos_tail"
    fi
    __mnemos_tail=
    return $code
  }
  case ";${PROMPT_COMMAND};" in
    *";__mnemos_precmd;"*) ;;
    *) PROMPT_COMMAND="__mnemos_precmd${PROMPT_COMMAND:+;$PROMPT_COMMAND}" ;;
  esac
fi
