/* The cold-start floor's /init: the kernel reached userspace, so power off at once. */
#include <sys/reboot.h>
#include <unistd.h>
int main(void) {
  reboot(RB_AUTOBOOT); /* reboot=t + QEMU -no-reboot: QEMU exits */
  for (;;) pause();
}
