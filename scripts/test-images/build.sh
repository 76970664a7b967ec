#!/usr/bin/env bash
# Builds the container images the testkit's testcontainers provider can use on a machine that
# cannot pull from a registry: a Debian base made with debootstrap (docker import), then Kafka
# (KRaft, from the jars the testkit caches), PostgreSQL, Redis, MariaDB, Node and the job runtime image.
#
#   scripts/test-images/build.sh [base|kafka|postgres|redis|mariadb|node|job ...]   (default: all)
#
# Idempotent and cached by content: every image carries the label org.onceflow.inputs, a hash of
# everything it is built from (Dockerfile, scripts, jars, parent image, versions); an image whose
# label matches is not built again. Prints the variables that point the testkit at the images.
#
# Environment: ONCEFLOW_DEBIAN_MIRROR (default: the mirror apt uses, else deb.debian.org),
# ONCEFLOW_DEBIAN_SUITE (bookworm), ONCEFLOW_KAFKA_VERSIONS (3.9.1,4.1.1),
# ONCEFLOW_IMAGE_PREFIX (onceflow-test), ONCEFLOW_CACHE_DIR (~/.cache/onceflow).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

suite=${ONCEFLOW_DEBIAN_SUITE:-bookworm}
prefix=${ONCEFLOW_IMAGE_PREFIX:-onceflow-test}
kafka_versions=${ONCEFLOW_KAFKA_VERSIONS:-3.9.1,4.1.1}
cache_dir=${ONCEFLOW_CACHE_DIR:-$HOME/.cache/onceflow}
label=org.onceflow.inputs

apt_mirror() {
  local uri
  uri=$(grep -hsE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null |
    grep -v security | sed -E 's/^URIs:[[:space:]]*//; s/^deb (\[[^]]*\] )?//; s/[[:space:]].*//' |
    head -n 1 || true)
  echo "${uri:-http://deb.debian.org/debian}"
}
mirror=${ONCEFLOW_DEBIAN_MIRROR:-$(apt_mirror)}

log() { printf '[test-images] %s\n' "$*" >&2; }
hash_of() { sha256sum | cut -c1-16; }
current_inputs() { docker image inspect --format "{{ index .Config.Labels \"$label\" }}" "$1" 2>/dev/null || true; }
image_id() { docker image inspect --format '{{.Id}}' "$1"; }

# up_to_date IMAGE HASH: the image exists and was built from exactly these inputs.
up_to_date() {
  if [[ "$(current_inputs "$1")" == "$2" ]]; then
    log "$1 is up to date (inputs $2)"
    return 0
  fi
  return 1
}

# docker_build IMAGE HASH CONTEXT [build args...]
docker_build() {
  local image=$1 inputs=$2 context=$3
  shift 3
  log "building $image (inputs $inputs)"
  docker build -q --label "$label=$inputs" -t "$image" "$@" "$context" >/dev/null
}

base_packages="ca-certificates,tini"
base_image="$prefix/debian:$suite"
build_base() {
  local inputs
  inputs=$(printf 'base|%s|%s|%s\n' "$suite" "$mirror" "$base_packages" | hash_of)
  up_to_date "$base_image" "$inputs" && return 0
  command -v debootstrap >/dev/null || { log "debootstrap is missing: apt-get install -y debootstrap"; exit 1; }
  local rootfs
  rootfs=$(mktemp -d /tmp/onceflow-rootfs-XXXXXX)
  log "debootstrap $suite from $mirror into $rootfs"
  debootstrap --variant=minbase --include="$base_packages" "$suite" "$rootfs" "$mirror" >/tmp/onceflow-debootstrap.log 2>&1 ||
    { tail -n 30 /tmp/onceflow-debootstrap.log >&2; rm -rf "$rootfs"; exit 1; }
  # Containers use the same mirror; keep their images small.
  printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$mirror" "$suite" "$suite" >"$rootfs/etc/apt/sources.list.d/debian.sources"
  rm -f "$rootfs/etc/apt/sources.list"
  printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' >"$rootfs/etc/apt/apt.conf.d/90onceflow"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | docker import \
    --change "LABEL $label=$inputs" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8' \
    --change 'CMD ["bash"]' - "$base_image" >/dev/null
  rm -rf "$rootfs"
  log "built $base_image"
}

# The hash of a directory's files (names and contents) plus extra words.
context_hash() {
  local dir=$1
  shift
  { (cd "$dir" && find . -type f -print0 | sort -z | xargs -0 sha256sum); printf '%s\n' "$@"; } | hash_of
}

build_kafka() {
  local version libs context inputs image parent
  parent=$(image_id "$base_image")
  for version in ${kafka_versions//,/ }; do
    libs="$cache_dir/kafka-$version/libs"
    if [[ ! -d "$libs" ]] || ! ls "$libs"/kafka_2.13-"$version".jar >/dev/null 2>&1; then
      log "fetching the Kafka $version jars (node packages/testkit/dist/cli.js prepare --kafka $version)"
      node "$root/packages/testkit/dist/cli.js" prepare --kafka "$version" >&2
    fi
    image="$prefix/kafka:$version"
    inputs=$(context_hash "$here/kafka" "$version" "$parent" "$(cd "$libs" && ls | sort | tr '\n' ' ')")
    up_to_date "$image" "$inputs" && continue
    context=$(mktemp -d /tmp/onceflow-kafka-image-XXXXXX)
    cp -r "$here/kafka/." "$context/"
    cp -r "$libs" "$context/libs"
    docker_build "$image" "$inputs" "$context" --build-arg "BASE=$base_image" --build-arg "KAFKA_VERSION=$version"
    rm -rf "$context"
  done
}

build_simple() {
  local name=$1 image inputs parent
  image="$prefix/$name:latest"
  parent=$(image_id "$base_image")
  inputs=$(context_hash "$here/$name" "$parent")
  up_to_date "$image" "$inputs" && return 0
  docker_build "$image" "$inputs" "$here/$name" --build-arg "BASE=$base_image"
}

# Node from this machine (the Debian/NodeSource package's binary and npm): Debian's own nodejs
# is older than the packages' `engines`.
build_node() {
  local image inputs parent node_bin npm_dir context version
  node_bin=$(command -v node)
  npm_dir=$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")
  version=$(node --version)
  image="$prefix/node:${version#v}"
  parent=$(image_id "$base_image")
  inputs=$(context_hash "$here/node" "$parent" "$version" "$(sha256sum "$node_bin" | cut -c1-16)")
  if ! up_to_date "$image" "$inputs"; then
    context=$(mktemp -d /tmp/onceflow-node-image-XXXXXX)
    cp -r "$here/node/." "$context/"
    cp "$node_bin" "$context/node"
    cp -r "$npm_dir" "$context/npm"
    docker_build "$image" "$inputs" "$context" --build-arg "BASE=$base_image"
    rm -rf "$context"
  fi
  docker tag "$image" "$prefix/node:latest"
}

# The job runtime image of examples/kubernetes/Dockerfile, from `npm pack` tarballs of the local
# packages (the pre-publish path) on the Node image above.
build_job() {
  local context inputs image="$prefix/job:latest" parent package
  parent=$(image_id "$prefix/node:latest")
  context=$(mktemp -d /tmp/onceflow-job-image-XXXXXX)
  mkdir -p "$context/tarballs"
  for package in core connector-kafka connector-postgres; do
    [[ -d "$root/packages/$package/dist" ]] || { log "packages/$package is not built: npm run build"; exit 1; }
    (cd "$root/packages/$package" && npm pack --silent --pack-destination "$context/tarballs" >/dev/null)
  done
  cp "$root/examples/kubernetes/Dockerfile" "$context/Dockerfile"
  # A tarball's bytes carry timestamps: hash the files inside instead.
  inputs=$( { sha256sum <"$context/Dockerfile"; for package in "$context"/tarballs/*.tgz; do
    tar -xOzf "$package" | sha256sum; done; echo "$parent"; } | hash_of)
  if ! up_to_date "$image" "$inputs"; then
    # The build itself reaches no registry: the dependencies come from an npm cache filled here.
    log "filling an npm cache for the job image's dependencies"
    npm install --prefix "$context/install" --cache "$context/tarballs/npm-cache" --omit=dev --no-audit \
      --no-fund --silent "$context"/tarballs/*.tgz prom-client@15.1.3 >/dev/null
    rm -rf "$context/install"
    docker_build "$image" "$inputs" "$context" --build-arg "NODE_IMAGE=$prefix/node:latest"
  fi
  rm -rf "$context"
}

targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=(base kafka postgres redis mariadb node job)
command -v docker >/dev/null && docker info >/dev/null 2>&1 || { log "no Docker engine answers (docker info)"; exit 1; }
build_base
for target in "${targets[@]}"; do
  case "$target" in
    base) ;;
    kafka) build_kafka ;;
    postgres | redis | mariadb) build_simple "$target" ;;
    node) build_node ;;
    job) build_node && build_job ;;
    *) log "unknown image: $target (base, kafka, postgres, redis, mariadb, node, job)"; exit 2 ;;
  esac
done

cat <<EOF
# Point the testkit at these images:
export ONCEFLOW_KAFKA_IMAGE='$prefix/kafka:{version}'
export ONCEFLOW_POSTGRES_IMAGE='$prefix/postgres:latest'
export ONCEFLOW_REDIS_IMAGE='$prefix/redis:latest'
export ONCEFLOW_MARIADB_IMAGE='$prefix/mariadb:latest'
EOF
