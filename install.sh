#!/usr/bin/env bash
# Install Trellis (one executable) as a systemd service.
#
#   sudo ./install.sh                       # build if needed, install, enable and start
#   ./install.sh --prefix /tmp/stage        # stage the files under a root directory (packaging)
#   sudo ./install.sh --uninstall           # remove binary and unit; keep data and config
#
# Safe to run again: it upgrades the binary, rewrites the unit, and never touches an existing
# /etc/trellis/trellis.env or the data in /var/lib/trellis.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: install.sh [--prefix DIR] [--binary PATH] [--litestream PATH] [--uninstall] [--no-user] [--help]

Installs the Trellis binary to /usr/local/bin/trellis, the data directory /var/lib/trellis,
the systemd unit /etc/systemd/system/trellis.service and, if absent, /etc/trellis/trellis.env.

  --prefix DIR    install under DIR instead of / (no user is created, systemd is not touched)
  --binary PATH   the trellis executable to install (default: dist/trellis next to this
                  script, built with `npm ci && npm run build` when missing and npm exists)
  --litestream PATH
                  also install this Litestream executable as /usr/local/bin/litestream, for
                  continuous backup (npm ci puts one in
                  node_modules/@flydotio/litestream-linux-x64/litestream; docs/backup.md)
  --uninstall     remove the binary and the unit; data and env file are kept
  --no-user       do not create the `trellis` system user
  -h, --help      show this help
EOF
}

say() { printf '%s\n' "$*"; }
die() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }
usage_error() { printf 'install.sh: %s\n\n' "$*" >&2; usage >&2; exit 2; }

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
prefix=""
binary=""
litestream=""
uninstall=0
create_user=1

while (( $# > 0 )); do
  case "$1" in
    --prefix)    (( $# >= 2 )) || usage_error "--prefix needs a directory"; prefix=$2; shift 2 ;;
    --prefix=*)  prefix=${1#--prefix=}; shift ;;
    --binary)    (( $# >= 2 )) || usage_error "--binary needs a path"; binary=$2; shift 2 ;;
    --binary=*)  binary=${1#--binary=}; shift ;;
    --litestream)   (( $# >= 2 )) || usage_error "--litestream needs a path"; litestream=$2; shift 2 ;;
    --litestream=*) litestream=${1#--litestream=}; shift ;;
    --uninstall) uninstall=1; shift ;;
    --no-user)   create_user=0; shift ;;
    -h|--help)   usage; exit 0 ;;
    *)           usage_error "unknown argument: $1" ;;
  esac
done

if [[ -n "$prefix" ]]; then
  mkdir -p "$prefix"
  prefix=$(cd "$prefix" && pwd)
  [[ "$prefix" == "/" ]] && prefix=""
fi

# Paths as seen by the running service (what goes into the unit) …
SERVICE_BIN=/usr/local/bin/trellis
SERVICE_LITESTREAM=/usr/local/bin/litestream
SERVICE_DATA=/var/lib/trellis
SERVICE_ENV=/etc/trellis/trellis.env
SERVICE_USER=trellis
# … and where this run writes them.
bin_path="$prefix$SERVICE_BIN"
data_dir="$prefix$SERVICE_DATA"
unit_path="$prefix/etc/systemd/system/trellis.service"
env_path="$prefix$SERVICE_ENV"

is_root() { [[ $(id -u) -eq 0 ]]; }
real_root() { [[ -z "$prefix" ]]; }
have_systemd() { real_root && command -v systemctl >/dev/null 2>&1 && [[ -d /run/systemd/system ]]; }

if real_root && ! is_root; then
  die "installing to / needs root: run with sudo, or pass --prefix DIR to stage the files elsewhere"
fi

# ---------------------------------------------------------------------------
if (( uninstall )); then
  if have_systemd && systemctl list-unit-files trellis.service >/dev/null 2>&1; then
    if systemctl disable --now trellis >/dev/null 2>&1; then
      say "stopped and disabled trellis.service"
    fi
  fi
  for f in "$bin_path" "$unit_path"; do
    if [[ -e "$f" || -L "$f" ]]; then
      rm -f "$f"
      say "removed $f"
    else
      say "not present: $f"
    fi
  done
  if have_systemd; then
    systemctl daemon-reload
  fi
  say "kept data directory $data_dir and config $env_path (delete them yourself if you no longer need them)"
  if real_root && id -u "$SERVICE_USER" >/dev/null 2>&1; then
    say "kept system user $SERVICE_USER (remove with: userdel $SERVICE_USER)"
  fi
  exit 0
fi

# ---------------------------------------------------------------------------
# The binary: --binary, else dist/trellis beside this script, built on demand.
if [[ -n "$binary" ]]; then
  [[ -f "$binary" && -x "$binary" ]] || die "--binary $binary is not an executable file"
else
  binary="$script_dir/dist/trellis"
  if [[ ! -x "$binary" ]]; then
    command -v npm >/dev/null 2>&1 \
      || die "no $binary and no npm to build it: build it elsewhere (npm ci && npm run build) and pass --binary PATH"
    say "building $binary (npm ci && npm run build in $script_dir)"
    (cd "$script_dir" && npm ci --no-audit --no-fund && npm run build)
    [[ -x "$binary" ]] || die "the build did not produce $binary"
  fi
fi

if [[ -n "$litestream" ]]; then
  [[ -f "$litestream" && -x "$litestream" ]] || die "--litestream $litestream is not an executable file"
fi

changed=0   # did the binary or the unit change? (a running service is then restarted)

# Writes stdin to $1 with mode $2 unless the file already has exactly that content.
# Replaces by rename, so a running binary is never written into.
write_file() {
  local dest=$1 mode=$2 tmp
  install -d -m 0755 "$(dirname "$dest")"
  tmp=$(mktemp "$dest.XXXXXX")
  cat >"$tmp"
  if [[ -f "$dest" ]] && cmp -s "$tmp" "$dest"; then
    rm -f "$tmp"
    chmod "$mode" "$dest"
    say "unchanged: $dest"
    return 0
  fi
  local verb=installed
  [[ -e "$dest" ]] && verb=updated
  chmod "$mode" "$tmp"
  mv -f "$tmp" "$dest"
  say "$verb: $dest"
  changed=1
}

# ---------------------------------------------------------------------------
# 1. system user (only on the real root)
if real_root && (( create_user )); then
  if id -u "$SERVICE_USER" >/dev/null 2>&1; then
    say "system user $SERVICE_USER exists"
  else
    nologin=/usr/sbin/nologin
    [[ -x "$nologin" ]] || nologin=/sbin/nologin
    useradd --system --user-group --home-dir "$SERVICE_DATA" --no-create-home \
      --shell "$nologin" --comment "Trellis server" "$SERVICE_USER"
    say "created system user $SERVICE_USER"
  fi
fi

# 2. binary
if [[ "$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")" == "$bin_path" ]]; then
  say "unchanged: $bin_path (installing from its own location)"
else
  write_file "$bin_path" 0755 <"$binary"
fi

# 2b. Litestream (only when asked): serve starts it when TRELLIS_LITESTREAM_CONFIG is set, and finds it on PATH
if [[ -n "$litestream" ]]; then
  write_file "$prefix$SERVICE_LITESTREAM" 0755 <"$litestream"
fi

# 3. data directory (holds the database and the instance secret: not world-readable)
if [[ -d "$data_dir" ]]; then
  say "data directory exists: $data_dir (kept)"
else
  install -d -m 0750 "$data_dir"
  say "created data directory $data_dir"
fi
if real_root && id -u "$SERVICE_USER" >/dev/null 2>&1; then
  chown "$SERVICE_USER:" "$data_dir"
  chmod 0750 "$data_dir"
fi

# 4. env file: created once, never overwritten (it is the operator's configuration)
if [[ -e "$env_path" ]]; then
  say "kept existing config: $env_path"
else
  install -d -m 0755 "$(dirname "$env_path")"
  tmp=$(mktemp "$env_path.XXXXXX")
  cat >"$tmp" <<'EOF'
# Trellis configuration, read by trellis.service (EnvironmentFile=).
# Values here override the unit's Environment= lines; flags in ExecStart win over both.
# The data directory is set by the unit (--data /var/lib/trellis).
# After a change: systemctl restart trellis

# Listen address; put a reverse proxy (TLS) in front rather than exposing it.
#TRELLIS_HOST=127.0.0.1
#TRELLIS_PORT=8080

# Public address used in webhook URLs and links, e.g. https://trellis.example.com
#TRELLIS_BASE_URL=

# Signing secret for webhook URLs; by default 32 random bytes kept in /var/lib/trellis/secret.
# Changing it invalidates every webhook URL handed out.
#TRELLIS_SECRET=

#TRELLIS_WEBHOOK_RATE_PER_MIN=60
#TRELLIS_API_RATE_PER_MIN=60
#TRELLIS_API_RATE_PER_HOUR=1000
#TRELLIS_API_RATE_PER_DAY=10000
# Workflow runs executed at once: 4 by default on the embedded SQLite, 8 on PostgreSQL (TRELLIS_DATABASE_URL).
#TRELLIS_EXECUTOR_CONCURRENCY=4
#TRELLIS_LOG_LEVEL=info
#TRELLIS_MAX_BODY_BYTES=65536

# Local and private destinations that workflow http steps may call (refused by default):
# host names, addresses and CIDRs, e.g. hooks.internal, 10.20.0.0/16
#TRELLIS_HTTP_ALLOW=

# Continuous backup (docs/backup.md): serve runs `litestream replicate` on this configuration,
# which must replicate /var/lib/trellis/trellis.db (install.sh --litestream PATH installs the
# executable; else it is looked for on PATH). A directory replica must be writable by the service:
# systemctl edit trellis → [Service] ReadWritePaths=/srv/trellis-replica
#TRELLIS_LITESTREAM_CONFIG=/etc/trellis/litestream.yml
#TRELLIS_LITESTREAM_BIN=/usr/local/bin/litestream
EOF
  chmod 0600 "$tmp"   # may hold TRELLIS_SECRET; systemd reads it as root
  mv -f "$tmp" "$env_path"
  say "created config $env_path"
fi

# 5. systemd unit (ours: rewritten on every run; customise with `systemctl edit trellis`)
write_file "$unit_path" 0644 <<EOF
# Installed by Trellis install.sh; rewritten on upgrade.
# Customise with a drop-in: systemctl edit trellis
[Unit]
Description=Trellis back-office collaboration and workflow server
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
User=$SERVICE_USER
Environment=TRELLIS_HOST=127.0.0.1
EnvironmentFile=-$SERVICE_ENV
ExecStart=$SERVICE_BIN serve --data $SERVICE_DATA
Restart=on-failure
RestartSec=2
# Graceful shutdown finishes or releases in-flight steps and checkpoints the WAL.
KillSignal=SIGTERM
# SIGTERM to Trellis alone: it stops the Litestream it started after its own last commit
# (SIGKILL still reaches every process of the unit when TimeoutStopSec runs out).
KillMode=mixed
TimeoutStopSec=30
UMask=0077

NoNewPrivileges=true
ProtectSystem=strict
ProtectHome=true
ReadWritePaths=$SERVICE_DATA
PrivateTmp=true
PrivateDevices=true
ProtectKernelTunables=true
ProtectKernelModules=true
ProtectControlGroups=true
RestrictSUIDSGID=true
LockPersonality=true

[Install]
WantedBy=multi-user.target
EOF

# ---------------------------------------------------------------------------
if real_root && ! id -u "$SERVICE_USER" >/dev/null 2>&1; then
  say "warning: user $SERVICE_USER does not exist (--no-user); create it or the service will not start:"
  say "  useradd --system --user-group --home-dir $SERVICE_DATA --shell /usr/sbin/nologin $SERVICE_USER"
  say "  chown $SERVICE_USER: $SERVICE_DATA"
fi

if have_systemd; then
  was_active=0
  systemctl is-active --quiet trellis && was_active=1
  systemctl daemon-reload
  systemctl enable --now trellis
  if (( was_active && changed )); then
    systemctl restart trellis
    say "restarted trellis.service with the new files"
  else
    say "enabled and started trellis.service"
  fi
  say "status: systemctl status trellis · logs: journalctl -u trellis"
  say "first start prints a one-time setup link for the first admin: journalctl -u trellis | grep -i setup"
elif real_root; then
  say "systemd is not running here; start Trellis by hand, e.g.:"
  say "  runuser -u $SERVICE_USER -- $SERVICE_BIN serve --data $SERVICE_DATA"
else
  say "staged under $prefix; on the target machine run:"
  say "  systemctl daemon-reload && systemctl enable --now trellis"
fi
