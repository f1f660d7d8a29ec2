"""glibc's facts about thread stacks and malloc arenas, shared by the pre-flight (caps/stacks)
and the supervisor's diagnosis (a leaf, standard library only: imported at every start)."""

STACK_UNLIMITED = 2 * 1024 * 1024  # the default stack where RLIMIT_STACK is unlimited
# (ARCH_STACK_DEFAULT_SIZE, x86_64 and aarch64); otherwise RLIMIT_STACK's soft limit
STACK_MIN = 16384  # PTHREAD_STACK_MIN
GUARD = 4096  # the guard page below every thread stack
ARENA = 64 << 20  # a malloc arena's address-space reservation (HEAP_MAX_SIZE, 64-bit)
