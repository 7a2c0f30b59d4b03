//! The precompiled passes of the radix sort ([`crate::radix`]): the generated kernel writes a
//! row's records (each an order key above a payload, in one integer of twice the key's
//! width) and calls [`axle_rt_radix_sort`], which sorts them by key with a stable
//! least-significant-digit radix sort of 8-bit digits; the kernel then reads the payloads in
//! order. The passes are the same for every sort, so compiling them once here, rather than
//! once per sort kernel, keeps them out of every program's LLVM time.
//!
//! Invariants:
//! - The order is the stable order of the keys as unsigned integers: records with equal keys
//!   keep their order, so the result equals the generated passes' and the merge sort's bit for
//!   bit (the kernel's keys already carry the comparator's order).
//! - One call sorts one row on the calling thread; nothing here allocates but an 8 KiB
//!   histogram table on the stack.

/// Digits are 8 bits wide.
const DIGIT: u32 = 8;
const BUCKETS: usize = 1 << DIGIT;

/// A record: its key and the whole record as stored.
trait Record: Copy {
    /// The key's digit `pass` (0 the least significant).
    fn digit(self, pass: u32) -> usize;
}

/// A record of a 32-bit key: `key << 32 | payload`.
impl Record for u64 {
    #[inline(always)]
    fn digit(self, pass: u32) -> usize {
        ((self >> (32 + pass * DIGIT)) as usize) & (BUCKETS - 1)
    }
}

/// A record of a 64-bit key, stored as the little-endian 128-bit integer
/// `key << 64 | payload`: the payload's word first, then the key's.
impl Record for [u64; 2] {
    #[inline(always)]
    fn digit(self, pass: u32) -> usize {
        ((self[1] >> (pass * DIGIT)) as usize) & (BUCKETS - 1)
    }
}

/// Sorts `a` by key, using `b` (as long) as the second plane; returns whether the sorted
/// records ended in `b`.
fn sort<R: Record, const PASSES: usize>(a: &mut [R], b: &mut [R]) -> bool {
    let mut hist = [[0u32; BUCKETS]; PASSES];
    for &r in a.iter() {
        for (pass, h) in hist.iter_mut().enumerate() {
            h[r.digit(pass as u32)] += 1;
        }
    }
    let len = a.len();
    let (mut src, mut dst) = (a, b);
    let mut in_b = false;
    for (pass, h) in hist.iter_mut().enumerate() {
        let pass = pass as u32;
        // A digit every key shares moves nothing.
        if h[src[0].digit(pass)] as usize == len {
            continue;
        }
        let mut sum = 0u32;
        for c in h.iter_mut() {
            let n = *c;
            *c = sum;
            sum += n;
        }
        let out = dst.as_mut_ptr();
        for &r in src.iter() {
            let slot = &mut h[r.digit(pass)];
            let at = *slot as usize;
            *slot += 1;
            // SAFETY: the counts are of these very records, so every bucket's slots are
            // below its successor's first and the last below `len`: `at < dst.len()`.
            unsafe { out.add(at).write(r) };
        }
        std::mem::swap(&mut src, &mut dst);
        in_b = !in_b;
    }
    in_b
}

/// Sorts the `len` records at `a` by key (`key_bits` 32: 64-bit records; 64: 128-bit
/// records), with `b` as scratch of as many records; returns the plane holding the sorted
/// records (`a` or `b`). Arguments the compiler never passes (another key width, a
/// negative length, a null plane) abort the process rather than sort wrongly.
///
/// # Safety
/// `a` and `b` must each hold `len` records of the width `key_bits` gives, aligned to 8
/// bytes, not overlapping, and no other thread may touch them during the call.
pub(crate) unsafe extern "C" fn axle_rt_radix_sort(
    a: *mut u8,
    b: *mut u8,
    len: i64,
    key_bits: i64,
) -> *mut u8 {
    let Ok(n) = usize::try_from(len) else {
        fail();
    };
    if n == 0 {
        return a;
    }
    if a.is_null() || b.is_null() || !(a as usize | b as usize).is_multiple_of(8) {
        fail();
    }
    let in_b = match key_bits {
        32 => {
            // SAFETY: two planes of `n` 64-bit records (the caller's contract).
            let (a, b) = unsafe {
                (
                    std::slice::from_raw_parts_mut(a.cast::<u64>(), n),
                    std::slice::from_raw_parts_mut(b.cast::<u64>(), n),
                )
            };
            sort::<u64, 4>(a, b)
        }
        64 => {
            // SAFETY: two planes of `n` 128-bit records (the caller's contract).
            let (a, b) = unsafe {
                (
                    std::slice::from_raw_parts_mut(a.cast::<[u64; 2]>(), n),
                    std::slice::from_raw_parts_mut(b.cast::<[u64; 2]>(), n),
                )
            };
            sort::<[u64; 2], 8>(a, b)
        }
        _ => fail(),
    };
    if in_b {
        b
    } else {
        a
    }
}

fn fail() -> ! {
    eprintln!("axle runtime: axle_rt_radix_sort called with arguments the compiler never passes");
    std::process::abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records32(keys: &[u32]) -> Vec<u64> {
        keys.iter()
            .enumerate()
            .map(|(i, &k)| (k as u64) << 32 | i as u64)
            .collect()
    }

    fn run32(keys: &[u32]) -> Vec<u64> {
        let mut a = records32(keys);
        let mut b = vec![0u64; keys.len()];
        // SAFETY: two planes of `keys.len()` records.
        let out = unsafe {
            axle_rt_radix_sort(
                a.as_mut_ptr().cast(),
                b.as_mut_ptr().cast(),
                keys.len() as i64,
                32,
            )
        };
        if out == b.as_mut_ptr().cast() {
            b
        } else {
            a
        }
    }

    #[test]
    fn sorts_32_bit_keys_stably() {
        let keys: Vec<u32> = (0..3000u32)
            .map(|i| i.wrapping_mul(2_654_435_761) >> (i % 24))
            .map(|k| k % 977)
            .collect();
        let got = run32(&keys);
        let mut want = records32(&keys);
        want.sort_by_key(|r| r >> 32); // stable
        assert_eq!(got, want);
    }

    #[test]
    fn skips_shared_digits_and_keeps_order() {
        // Every key shares its two upper bytes; the sort still orders by the rest.
        let keys: Vec<u32> = (0..500u32)
            .map(|i| 0xABCD_0000 | ((499 - i) % 300))
            .collect();
        let got = run32(&keys);
        let mut want = records32(&keys);
        want.sort_by_key(|r| r >> 32);
        assert_eq!(got, want);
        // Equal keys: the input order.
        let same = run32(&[7; 300]);
        assert_eq!(same, records32(&[7; 300]));
    }

    #[test]
    fn sorts_64_bit_keys_stably() {
        let keys: Vec<u64> = (0..2000u64)
            .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_000_003) << (i % 40))
            .collect();
        let mut a: Vec<[u64; 2]> = keys
            .iter()
            .enumerate()
            .map(|(i, &k)| [i as u64, k])
            .collect();
        let mut want = a.clone();
        want.sort_by_key(|r| r[1]);
        let mut b = vec![[0u64; 2]; keys.len()];
        // SAFETY: two planes of `keys.len()` records.
        let out = unsafe {
            axle_rt_radix_sort(
                a.as_mut_ptr().cast(),
                b.as_mut_ptr().cast(),
                keys.len() as i64,
                64,
            )
        };
        let got = if out == b.as_mut_ptr().cast() { b } else { a };
        assert_eq!(got, want);
    }
}
