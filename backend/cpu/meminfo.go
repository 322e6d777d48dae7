package cpu

// bigAlloc is the buffer size from which Alloc, on a device without a
// budget, checks the memory the system has available: a context size or
// batch far beyond the machine then fails with an error naming the sizes
// instead of the process being killed when the buffer is first written.
const bigAlloc = 64 << 20
