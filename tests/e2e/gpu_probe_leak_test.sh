# gpu_probe_leak_test.sh - opening the GPU with every installed Vulkan driver in the probe
# (Mesa ships intel, radeon, virtio, gfxstream beside lavapipe; radeon's probe leaks 128 bytes
# and is unloaded) runs clean under LeakSanitizer: the driver probe's allocations are not
# ours, everything after it is still checked. In the normal build there is no LeakSanitizer
# and the command just has to run.
. tests/e2e/lib.sh
last=
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
# The drivers that find no hardware go first (the leak shows when radeon is probed before
# lavapipe); lavapipe and any driver the environment already names go last.
files=
for d in /usr/share/vulkan/icd.d /etc/vulkan/icd.d /usr/local/share/vulkan/icd.d; do
    for f in "$d"/*.json; do
        [ -f "$f" ] && [[ "$f" != *lvp_icd* ]] && files=${files:+$files:}$f
    done
    [ -f "$d/lvp_icd.json" ] && last=${last:+$last:}$d/lvp_icd.json
done
named=${VK_DRIVER_FILES:-${VK_ICD_FILENAMES:-}}
for f in ${last:-} $named; do files=${files:+$files:}$f; done
check "some Vulkan driver is installed (tools/setup.sh installs lavapipe)" [ -n "$files" ]
VK_DRIVER_FILES=$files "$POOLED" run -m "$SHARED/models/stories260K.gguf" -p "Once" -n 2 \
    --temp 0 --backend webgpu >"$TMP/out" 2>"$TMP/err"
rc=$?
check "webgpu with every driver probed runs (exit $rc: $(grep -m1 -E 'ERROR|pooled:' "$TMP/err"))" [ $rc -eq 0 ]
check "no LeakSanitizer report" bash -c "! grep -q LeakSanitizer '$TMP/err'"
finish
