#!/usr/bin/env python3
"""Packs layers into an OCI image layout directory (offline test images).

usage: oci-pack.py OUT_DIR TAG CONFIG_JSON LAYER [LAYER...]
LAYER is a directory (tarred with root ownership, so no root is needed) or a .tar file.
CONFIG_JSON is the image config's "config" object (Env, Cmd, Entrypoint, WorkingDir, User).
"""
import gzip, hashlib, io, json, os, sys, tarfile

def tar_dir(path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames.sort()
            for name in sorted(dirnames + filenames):
                full = os.path.join(dirpath, name)
                info = tf.gettarinfo(full, arcname=os.path.relpath(full, path))
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                info.mtime = 1700000000
                if info.isreg():
                    with open(full, "rb") as f:
                        tf.addfile(info, f)
                else:
                    tf.addfile(info)
    return buf.getvalue()

def put_blob(out, data):
    digest = hashlib.sha256(data).hexdigest()
    path = os.path.join(out, "blobs", "sha256", digest)
    with open(path, "wb") as f:
        f.write(data)
    return "sha256:" + digest

def main():
    out, tag, config_json, layers = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    os.makedirs(os.path.join(out, "blobs", "sha256"), exist_ok=True)
    descs, diff_ids = [], []
    for layer in layers:
        raw = tar_dir(layer) if os.path.isdir(layer) else open(layer, "rb").read()
        diff_ids.append("sha256:" + hashlib.sha256(raw).hexdigest())
        if len(raw) < (64 << 20):  # small layers gzipped, large ones plain: both are valid OCI
            data = gzip.compress(raw, compresslevel=6, mtime=0)
            media = "application/vnd.oci.image.layer.v1.tar+gzip"
        else:
            data, media = raw, "application/vnd.oci.image.layer.v1.tar"
        descs.append({"mediaType": media, "digest": put_blob(out, data), "size": len(data)})
    config = {
        "architecture": "amd64", "os": "linux",
        "config": json.loads(config_json),
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "history": [{"created_by": "boxlite scripts/oci-pack.py"} for _ in layers],
    }
    cdata = json.dumps(config, sort_keys=True).encode()
    manifest = {
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": put_blob(out, cdata), "size": len(cdata)},
        "layers": descs,
    }
    mdata = json.dumps(manifest, sort_keys=True).encode()
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
             "manifests": [{"mediaType": manifest["mediaType"], "digest": put_blob(out, mdata),
                            "size": len(mdata),
                            "annotations": {"org.opencontainers.image.ref.name": tag}}]}
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(index, f)
    with open(os.path.join(out, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)

if __name__ == "__main__":
    main()
