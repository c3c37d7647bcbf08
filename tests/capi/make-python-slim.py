#!/usr/bin/env python3
"""A stand-in for "python:slim" (no registry here holds it): the
debian-python test image plus one layer with /usr/bin/python -> python3 (and
/usr/local/bin/python, python:slim's path), which the
reference's Simple quickstart runs. usage: make-python-slim.py SRC_LAYOUT OUT_LAYOUT"""
import gzip, hashlib, io, json, os, shutil, sys, tarfile

def blob(layout, digest):
    return os.path.join(layout, "blobs", *digest.split(":"))

def put(out, data):
    d = "sha256:" + hashlib.sha256(data).hexdigest()
    with open(blob(out, d), "wb") as f:
        f.write(data)
    return d

VERSION = "2"  # 2: also /usr/local/bin/python


def main():
    src, out = sys.argv[1], sys.argv[2]
    stamp = os.path.join(out, "boxlite-layout-version")
    if os.path.exists(stamp) and open(stamp).read() == VERSION:
        return
    shutil.rmtree(out, ignore_errors=True)  # an older layout (without the version stamp)
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.join(tmp, "blobs", "sha256"))
    index = json.load(open(os.path.join(src, "index.json")))
    manifest = json.load(open(blob(src, index["manifests"][0]["digest"])))
    config = json.load(open(blob(src, manifest["config"]["digest"])))
    for layer in manifest["layers"]:
        try:
            os.link(blob(src, layer["digest"]), blob(tmp, layer["digest"]))
        except OSError:  # another filesystem
            shutil.copy(blob(src, layer["digest"]), blob(tmp, layer["digest"]))
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tf:
        info = tarfile.TarInfo("usr/bin/python")
        info.type, info.linkname, info.mode, info.mtime = tarfile.SYMTYPE, "python3", 0o777, 1700000000
        tf.addfile(info)
        # python:slim's interpreter path (the Python SDK's CodeBox runs it).
        info = tarfile.TarInfo("usr/local/bin/python")
        info.type, info.linkname, info.mode, info.mtime = tarfile.SYMTYPE, "/usr/bin/python3", 0o777, 1700000000
        tf.addfile(info)
    raw = raw.getvalue()
    gz = gzip.compress(raw, mtime=0)
    manifest["layers"].append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                               "digest": put(tmp, gz), "size": len(gz)})
    config["rootfs"]["diff_ids"].append("sha256:" + hashlib.sha256(raw).hexdigest())
    cfg = json.dumps(config).encode()
    manifest["config"] = dict(manifest["config"], digest=put(tmp, cfg), size=len(cfg))
    man = json.dumps(manifest).encode()
    entry = dict(index["manifests"][0], digest=put(tmp, man), size=len(man))
    json.dump(dict(index, manifests=[entry]), open(os.path.join(tmp, "index.json"), "w"))
    shutil.copy(os.path.join(src, "oci-layout"), os.path.join(tmp, "oci-layout"))
    with open(os.path.join(tmp, "boxlite-layout-version"), "w") as f:
        f.write(VERSION)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    os.rename(tmp, out)

main()
