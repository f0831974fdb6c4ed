#!/usr/bin/env bash
# Build corral's docker sandbox image from a checkout, without any image registry.
# The builder and its Dockerfile live in the package (sandbox/image/), where an installed
# corral finds them too (`corral image build`); this runs that one copy. Environment
# variables (CORRAL_SANDBOX_IMAGE, CORRAL_BASE_IMAGE, ...) are documented there.
set -euo pipefail
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/sandbox/image/build.sh" "$@"
