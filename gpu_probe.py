import subprocess, sys, tempfile, os, json
jail = open("labs/course/jail.py").read()
box = tempfile.mkdtemp()
os.makedirs(os.path.join(box, "pkg"))
for limit in [6 * 2**30, 0]:
    spec = {"box": box, "cover": [os.path.expanduser("~"), os.getcwd()], "readable": sorted({sys.prefix, sys.base_prefix}), "limits": {"as": limit, "fsize": 2**30, "nofile": 4096, "nproc": 512}}
    code = jail + f"\nseal(**{spec!r})\nimport torch\nx = torch.ones(3, device='cuda')\nprint('cuda ok', float(x.sum()), os.getpid())\n"
    r = subprocess.run(["unshare", "--user", "--map-root-user", "--net", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc", sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    print("RLIMIT_AS", limit, "rc", r.returncode, r.stdout.strip(), r.stderr.strip()[-600:])
