/* Hides the CPU's SHA extensions (SHA-NI) from one process, so that its SHA-256 takes the
 * path a CPU without them takes. Loaded with LD_PRELOAD by scripts/bench.sh when
 * BENCH_MASK_SHA=1.
 *
 * A library such as ring asks the CPU itself (the cpuid instruction), not the kernel, so
 * no variable can hide a feature from it. On a CPU with CPUID faulting (`cpuid_fault` in
 * /proc/cpuinfo), arch_prctl(ARCH_SET_CPUID, 0) makes cpuid raise SIGSEGV instead; the
 * handler below runs the real instruction with faulting briefly off, clears the SHA bit
 * (leaf 7, subleaf 0, EBX bit 29) and steps over the instruction. The setting ends at
 * execve, and the library is loaded again there. Any other SIGSEGV gets the default
 * action, as without this library. */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <cpuid.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#ifndef MASK_SHA_CHECK
static long set_cpuid(int allowed) { return syscall(SYS_arch_prctl, ARCH_SET_CPUID, allowed); }

static void on_segv(int sig, siginfo_t *info, void *context) {
    (void)info;
    ucontext_t *uc = context;
    greg_t *reg = uc->uc_mcontext.gregs;
    const uint8_t *ip = (const uint8_t *)reg[REG_RIP];
    if (ip[0] != 0x0f || ip[1] != 0xa2 || set_cpuid(1) != 0) {
        signal(sig, SIG_DFL); /* not cpuid: fault again, as without this library */
        return;
    }
    unsigned leaf = (unsigned)reg[REG_RAX], sub = (unsigned)reg[REG_RCX], a, b, c, d;
    __cpuid_count(leaf, sub, a, b, c, d);
    set_cpuid(0);
    if (leaf == 7 && sub == 0)
        b &= ~(1u << 29);
    reg[REG_RAX] = a;
    reg[REG_RBX] = b;
    reg[REG_RCX] = c;
    reg[REG_RDX] = d;
    reg[REG_RIP] += 2;
}

__attribute__((constructor)) static void mask_sha(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    if (sigaction(SIGSEGV, &sa, 0) == 0)
        set_cpuid(0);
}

#else
/* Built with -DMASK_SHA_CHECK, a program instead: prints the SHA bit it sees (1 on this
 * CPU, 0 with the library preloaded). */
#include <stdio.h>
int main(void) {
    unsigned a, b, c, d;
    __cpuid_count(7, 0, a, b, c, d);
    printf("%u\n", (b >> 29) & 1);
    return 0;
}
#endif
