# Sourced first by the device scripts (pretrain.sh, pretrain_many.sh, sweep.sh): unpack what scripts/device/
# pack_carry.sh gzipped into .carry (when carried), install the carried wheels (gluonts and its pydantic, for
# evaluation) beside the image's packages, and set the environment every later python3 of the call needs.
# Once per call: a script that sources this and then runs another that sources it too does not unpack twice.
[ -n "${TSFM_DEVICE_SETUP:-}" ] && return 0
if [ -f .carry/carry.tgz ]; then tar xzf .carry/carry.tgz || exit 1; fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1 TSFM_DEVICE_SETUP=1
