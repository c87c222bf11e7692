#ifndef CLOUDSYNC_MALLOC_H
#define CLOUDSYNC_MALLOC_H

// glibc's allocator settings, which Swift's Glibc module does not import (they are in <malloc.h>).

/// Sets M_MMAP_THRESHOLD: allocations of at least `bytes` get pages of their own, unmapped when freed (a fixed
/// threshold also stops glibc from raising it as mapped blocks are freed). 1 when set, 0 when glibc refused.
int cloudsync_set_mmap_threshold(int bytes);

#endif
