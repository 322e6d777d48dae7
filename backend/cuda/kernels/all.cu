// all.cu: the one translation unit gen.sh compiles to ptx/glmrun.ptx (and
// the CPU simulation compiles for the fake driver).
#include "matmul.cu"
#include "mmvq.cu"
#include "norm.cu"
#include "rope.cu"
#include "elementwise.cu"
#include "cache.cu"
#include "softmax.cu"
#include "router.cu"
#include "indexer.cu"
#include "mla.cu"
#include "moe.cu"
