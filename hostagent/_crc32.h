/* CRC-32 as zlib computes it, folded with PCLMULQDQ where the CPU has it (_crc32.c). */
#ifndef HOSTAGENT_CRC32_H
#define HOSTAGENT_CRC32_H

#include <stddef.h>
#include <stdint.h>

/* zlib's crc32_z(crc, buf, len), the same value for every input. */
uint32_t crc32_fast(uint32_t crc, const unsigned char *buf, size_t len);

/* 1 if this CPU folds (PCLMULQDQ and SSE4.1), 0 if every byte goes to zlib. */
int crc32_folds(void);

#endif
