// Runs a command under a seccomp filter that answers ENOSPC to every clone and
// unshare asking for one kind of namespace, as the kernel answers when a host limit
// (/proc/sys/user/max_*_namespaces) is reached: the tests' way to meet that refusal
// without changing the host's limits (a host may not let even root change them,
// and a test killed midway would leave them changed). The filter is inherited by
// everything the command starts: the shim, the zygote, the box's init.
// Usage: boxlite_refuse_namespaces net|pid CMD [ARG...]
#include <sched.h>
#include <seccomp.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <initializer_list>

int main(int argc, char** argv) {
  unsigned long flag = 0;
  if (argc >= 3 && std::strcmp(argv[1], "net") == 0) flag = CLONE_NEWNET;
  if (argc >= 3 && std::strcmp(argv[1], "pid") == 0) flag = CLONE_NEWPID;
  if (flag == 0) {
    std::fprintf(stderr, "usage: boxlite_refuse_namespaces net|pid CMD [ARG...]\n");
    return 2;
  }
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) {
    std::fprintf(stderr, "boxlite_refuse_namespaces: seccomp_init failed\n");
    return 1;
  }
  int rc = 0;
  for (int sys : {SCMP_SYS(unshare), SCMP_SYS(clone)}) {
    if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSPC), sys, 1, SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
  }
  if (rc == 0) rc = seccomp_load(ctx);
  seccomp_release(ctx);
  if (rc != 0) {
    std::fprintf(stderr, "boxlite_refuse_namespaces: load the filter: %s\n", std::strerror(-rc));
    return 1;
  }
  ::execvp(argv[2], argv + 2);
  std::fprintf(stderr, "boxlite_refuse_namespaces: exec %s: %s\n", argv[2], std::strerror(errno));
  return 127;
}
