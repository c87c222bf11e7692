#include "cloudsync_malloc.h"

#include <malloc.h>

int cloudsync_set_mmap_threshold(int bytes) { return mallopt(M_MMAP_THRESHOLD, bytes); }
