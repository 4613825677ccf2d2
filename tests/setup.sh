#!/usr/bin/env bash
# Installs the real ACP agents (written by others) that the tests drive, each in its own
# virtual environment under .agents/ in the repo root (gitignored).
#
#   .agents/fast-agent/      venv with fast-agent-mcp (needs Python >= 3.12)
#   .agents/sdk-echo/        venv with agent-client-protocol (runs the SDK's example agents)
#   .agents/sdk-examples/    examples/ from the SDK's sdist (echo_agent.py, agent.py, ...)
#   .agents/claude-code-acp/ Claude Code's ACP adapter (npm, needs Node >= 18), run against the
#                            scripted model endpoint of tests/fake_model_server.py
#   .agents/codex-acp/       Codex's ACP adapter (npm; a native binary, about 225 MB), run against
#                            the same endpoint
#
# Idempotent: a step whose marker file exists (and names the same version) is skipped.
# Override the interpreter used for fast-agent with ACP_NB_AGENT_PYTHON=/path/to/python3.1x.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"
AGENTS="$ROOT/.agents"

FAST_AGENT_VERSION="0.10.48"
ACP_SDK_VERSION="0.12.1"
CLAUDE_CODE_ACP_VERSION="0.16.2"
CLAUDE_AGENT_SDK_VERSION="0.2.44"  # the one 0.16.2 resolved to when measured; pinned with it
CODEX_ACP_VERSION="0.16.0"  # pins its platform binary package to the same version

export PIP_DISABLE_PIP_VERSION_CHECK=1
export PIP_NO_INPUT=1

mkdir -p "$AGENTS"

TMP_DIRS=()
cleanup() { local d; for d in "${TMP_DIRS[@]}"; do rm -rf "$d"; done; }
trap cleanup EXIT

log() { printf '[setup] %s\n' "$*" >&2; }

# Prints the path of a working interpreter of the given version (e.g. 3.13), or nothing.
# pyenv shims exist for every installed version but fail unless that version is active,
# so each candidate is actually run before it is accepted.
find_python() {
    local ver="$1" cand
    local pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
    local -a cands=("python$ver")
    if command -v pyenv >/dev/null 2>&1; then
        local prefix
        prefix="$(pyenv prefix "$ver" 2>/dev/null | head -n1 || true)"
        [[ -n "$prefix" ]] && cands+=("$prefix/bin/python$ver")
    fi
    for cand in "$pyenv_root"/versions/"$ver"*/bin/python"$ver" \
                /usr/local/bin/python"$ver" /usr/bin/python"$ver"; do
        cands+=("$cand")
    done
    for cand in "${cands[@]}"; do
        if "$cand" -c 'import sys, venv; assert sys.version_info >= (3, 12)' >/dev/null 2>&1; then
            "$cand" -c 'import sys; print(sys.executable)'
            return 0
        fi
    done
    return 0
}

# --- fast-agent --------------------------------------------------------------------------
install_fast_agent() {
    local venv="$AGENTS/fast-agent" marker="$AGENTS/fast-agent/.installed"
    if [[ -f "$marker" && "$(cat "$marker")" == "fast-agent-mcp==$FAST_AGENT_VERSION" \
          && -x "$venv/bin/fast-agent" ]]; then
        log "fast-agent $FAST_AGENT_VERSION already installed"
        return 0
    fi
    local py="${ACP_NB_AGENT_PYTHON:-}"
    [[ -z "$py" ]] && py="$(find_python 3.13)"
    [[ -z "$py" ]] && py="$(find_python 3.12)"
    if [[ -z "$py" ]]; then
        log "ERROR: fast-agent needs Python 3.13 or 3.12; none found (set ACP_NB_AGENT_PYTHON)"
        return 1
    fi
    log "installing fast-agent-mcp==$FAST_AGENT_VERSION with $("$py" --version 2>&1)"
    rm -rf "$venv"
    "$py" -m venv "$venv"
    "$venv/bin/python" -m pip install -q "fast-agent-mcp==$FAST_AGENT_VERSION"
    "$venv/bin/fast-agent" --help >/dev/null
    echo "fast-agent-mcp==$FAST_AGENT_VERSION" >"$marker"
}

# --- the SDK's example agents (echo_agent.py) ---------------------------------------------
install_sdk_examples() {
    local dest="$AGENTS/sdk-examples" marker="$AGENTS/sdk-examples/.installed"
    if [[ -f "$marker" && "$(cat "$marker")" == "agent-client-protocol==$ACP_SDK_VERSION" \
          && -f "$dest/echo_agent.py" ]]; then
        log "SDK examples $ACP_SDK_VERSION already present"
        return 0
    fi
    log "downloading the agent-client-protocol==$ACP_SDK_VERSION sdist for its examples/"
    local tmp
    tmp="$(mktemp -d)"
    TMP_DIRS+=("$tmp")
    "$AGENTS/sdk-echo/bin/python" -m pip download -q --no-deps --no-binary :all: \
        "agent-client-protocol==$ACP_SDK_VERSION" -d "$tmp/dl"
    mkdir -p "$tmp/src"
    tar -xzf "$tmp"/dl/agent_client_protocol-"$ACP_SDK_VERSION".tar.gz -C "$tmp/src"
    local examples="$tmp/src/agent_client_protocol-$ACP_SDK_VERSION/examples"
    [[ -f "$examples/echo_agent.py" ]] || { log "ERROR: sdist has no examples/echo_agent.py"; return 1; }
    rm -rf "$dest"
    mkdir -p "$dest"
    cp -R "$examples"/. "$dest"/
    cp "$tmp/src/agent_client_protocol-$ACP_SDK_VERSION/LICENSE" "$dest/LICENSE" 2>/dev/null || true
    echo "agent-client-protocol==$ACP_SDK_VERSION" >"$marker"
}

install_sdk_echo_venv() {
    local venv="$AGENTS/sdk-echo" marker="$AGENTS/sdk-echo/.installed"
    if [[ -f "$marker" && "$(cat "$marker")" == "agent-client-protocol==$ACP_SDK_VERSION" \
          && -x "$venv/bin/python" ]]; then
        log "sdk-echo venv already installed"
        return 0
    fi
    log "creating the sdk-echo venv (agent-client-protocol==$ACP_SDK_VERSION)"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q "agent-client-protocol==$ACP_SDK_VERSION"
    "$venv/bin/python" -c 'import acp' >/dev/null
    echo "agent-client-protocol==$ACP_SDK_VERSION" >"$marker"
}

# --- vendors' ACP adapters from npm (the tests give them a local model endpoint) ------------
# install_npm_agent DIR BIN PACKAGE@VERSION...: idempotent (the marker names the packages).
install_npm_agent() {
    local name="$1" bin="$2"
    shift 2
    local dest="$AGENTS/$name" marker="$AGENTS/$name/.installed" want="$*"
    if [[ -f "$marker" && "$(cat "$marker")" == "$want" \
          && -x "$dest/node_modules/.bin/$bin" ]]; then
        log "$name already installed ($want)"
        return 0
    fi
    if ! command -v npm >/dev/null 2>&1; then
        log "ERROR: $name needs Node >= 18 and npm; none found"
        return 1
    fi
    log "installing $want with node $(node --version)"
    rm -rf "$dest"
    mkdir -p "$dest"
    echo '{"private": true}' >"$dest/package.json"
    # Bounded: a stalled registry fails the step (and CI) within minutes, not at CI's limit.
    (cd "$dest" && timeout 600 npm install --no-audit --no-fund --loglevel=error --save-exact \
        --fetch-timeout=60000 --fetch-retries=2 "$@" </dev/null)
    [[ -x "$dest/node_modules/.bin/$bin" ]] \
        || { log "ERROR: no node_modules/.bin/$bin after npm install"; return 1; }
    echo "$want" >"$marker"
}

t0=$SECONDS
install_fast_agent
install_sdk_echo_venv
install_sdk_examples
t1=$SECONDS
install_npm_agent claude-code-acp claude-code-acp \
    "@zed-industries/claude-code-acp@$CLAUDE_CODE_ACP_VERSION" \
    "@anthropic-ai/claude-agent-sdk@$CLAUDE_AGENT_SDK_VERSION"
log "claude-code-acp step: $((SECONDS - t1)) s"
t1=$SECONDS
install_npm_agent codex-acp codex-acp "@zed-industries/codex-acp@$CODEX_ACP_VERSION"
log "codex-acp step: $((SECONDS - t1)) s"
log "agents ready in $AGENTS ($((SECONDS - t0)) s)"
