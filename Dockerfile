# corral sandbox image: the container a sub-agent's commands run in (docker backend).
#
# BASE_IMAGE: any slim Debian-based image works, e.g. debian:bookworm-slim where an
# image registry is reachable. The default, corral-base:bookworm, is a local
# debootstrap-built image made by scripts/build_sandbox_image.sh, so no registry is
# ever needed. Build with that script (it passes --network host: the engine is run
# with --bridge=none, so RUN steps have no other network).
ARG BASE_IMAGE=corral-base:bookworm
FROM ${BASE_IMAGE}

# ARG, not ENV: only affects this build, not the agent's environment.
ARG DEBIAN_FRONTEND=noninteractive

# Tools the agent needs, and what a project's environment setup most often runs (a Python
# venv with pip, Node with npm); one layer, no recommends, no apt lists left behind.
# upgrade: a debootstrapped base has only the point release, not security updates.
# A fixed uid/gid 1000 lets the executor match ownership of bind-mounted worktrees.
RUN apt-get update \
    && apt-get upgrade -y \
    && apt-get install -y --no-install-recommends ca-certificates git python3 python3-venv nodejs npm ripgrep \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 1000 corral \
    && useradd --uid 1000 --gid 1000 --home-dir /home/corral --create-home --shell /bin/sh corral \
    && install -d -o corral -g corral -m 0755 /workspace

ENV LANG=C.UTF-8
WORKDIR /workspace
USER corral

# The container is kept running; each command goes through `docker exec`.
# sleep does not forward signals or reap zombies: run with --init (or rm -f) for fast stops.
CMD ["sleep", "infinity"]
