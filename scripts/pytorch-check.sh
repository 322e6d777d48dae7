#!/bin/sh
# Runs the training tools' own checks (tools/train) where PyTorch is: the
# model code against transformers' logits on testdata/hf (and against the
# installed transformers itself), and the data generator's chat rendering
# against GLM-5's template rendered by transformers, and the training-only
# attention supervision's targets.
#
# PyTorch is not installable from this machine's Python registry; Debian sid
# packages it (python3-torch, python3-transformers). This looks for such a
# Debian root in $SID_DIR (default /var/tmp/glm-sid, e.g. made with
# debootstrap plus those packages) and runs the checks inside it with the
# repository bind-mounted. Without one it says so and exits 0.
set -eu
SID_DIR=${SID_DIR:-/var/tmp/glm-sid}
repo=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -x "$SID_DIR/usr/bin/python3" ] || ! chroot "$SID_DIR" python3 -c 'import torch, transformers' 2>/dev/null; then
	echo "skipped: no Debian root with python3-torch and python3-transformers in $SID_DIR"
	exit 0
fi
# A mount point of this run's own, so that other users of the root (a
# training run with the repository at /repo, say) are left alone.
mnt=/repo-check-$$
mkdir -p "$SID_DIR$mnt"
mountpoint -q "$SID_DIR/proc" || mount -t proc proc "$SID_DIR/proc"
mount --bind "$repo" "$SID_DIR$mnt"
status=0
chroot "$SID_DIR" sh -c "cd $mnt && python3 tools/train/test_glm5.py --live && python3 tools/train/test_data.py && python3 tools/train/test_supervision.py" || status=$?
umount "$SID_DIR$mnt" && rmdir "$SID_DIR$mnt"
exit $status
