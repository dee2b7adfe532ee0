//! Seeded rows for the rules' tests: one pseudo-random sequence, so every test's data is fixed.

/// Knuth's MMIX linear congruential sequence from `seed`: each `next(m)` is in `0..m`.
pub(crate) fn sequence(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut state = seed;
    move |m| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % m
    }
}
