//! How many cases the costliest tests run, chosen by `TESSERA_TEST_CASES`:
//!
//! - `full` (`scripts/test --full`): every combination;
//! - `pairwise` (the default): a pairwise covering subset;
//! - `each` (the sanitizer runs of `scripts/test`): each value of each dimension once.
//!
//! A test over several dimensions (pixel type, method, border, blend ...) that takes minutes
//! when it runs every combination on the emulated device lists its dimensions' sizes and runs
//! the cases [`cases`] returns. Pairwise coverage is the usual compromise of combinatorial
//! testing: every value of every dimension is run, and so is every pair of values of any two
//! dimensions, which finds the faults that depend on one or two choices at a fraction of the
//! product's cost (24 of 144 cases for 4 x 3 x 6 x 2). Under a sanitizer, where a case costs
//! ten times as much and what is looked for (a race, a stray access) belongs to a kernel, not
//! to a combination, each kernel variant running once is enough.
//!
//! Shared by the workspace tests (`tests/common`) and the CUDA crate's (`accel-cuda/tests`).

/// How many of a test's combinations run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coverage {
    Full,
    Pairwise,
    Each,
}

/// The coverage `TESSERA_TEST_CASES` asks for (`full`, `pairwise`, `each`); pairwise when
/// unset. Panics on another value, so a typo does not quietly run less.
pub fn coverage() -> Coverage {
    match std::env::var("TESSERA_TEST_CASES").as_deref() {
        Err(_) | Ok("pairwise") => Coverage::Pairwise,
        Ok("full") => Coverage::Full,
        Ok("each") => Coverage::Each,
        Ok(other) => panic!("TESSERA_TEST_CASES={other}: expected full, pairwise or each"),
    }
}

/// Whether every combination runs (`TESSERA_TEST_CASES=full`).
pub fn full() -> bool {
    coverage() == Coverage::Full
}

/// The cases of a test over dimensions of sizes `dims` (each at least 1), each case one
/// index per dimension, for the [`coverage`] asked for:
/// - full: the whole product, in lexicographic order;
/// - pairwise: with fewer than three dimensions the whole product, else a pairwise covering
///   subset (greedy: each case the first of the product that covers the most pairs not yet
///   covered);
/// - each: case `k` takes value `k mod n` of each dimension of size `n`, for `k` below the
///   largest size.
///
/// Deterministic.
pub fn cases(dims: &[usize]) -> Vec<Vec<usize>> {
    cases_at(dims, coverage())
}

/// [`cases`] at a given coverage.
pub fn cases_at(dims: &[usize], coverage: Coverage) -> Vec<Vec<usize>> {
    let product = product(dims);
    match coverage {
        Coverage::Full => return product,
        Coverage::Pairwise if dims.len() < 3 => return product,
        Coverage::Each => {
            let n = dims.iter().copied().max().unwrap_or(0);
            return (0..n).map(|k| dims.iter().map(|&d| k % d).collect()).collect();
        }
        Coverage::Pairwise => {}
    }
    let pairs_of = |case: &[usize]| {
        let mut out = Vec::new();
        for a in 0..case.len() {
            for b in a + 1..case.len() {
                out.push((a, case[a], b, case[b]));
            }
        }
        out
    };
    let mut uncovered: std::collections::BTreeSet<_> = product.iter().flat_map(|c| pairs_of(c)).collect();
    let mut chosen = Vec::new();
    while !uncovered.is_empty() {
        let mut best: Option<(usize, &Vec<usize>)> = None;
        for case in &product {
            let gain = pairs_of(case).iter().filter(|p| uncovered.contains(p)).count();
            if best.is_none_or(|(g, _)| gain > g) {
                best = Some((gain, case));
            }
        }
        let (_, case) = best.expect("a non-empty product");
        for p in pairs_of(case) {
            uncovered.remove(&p);
        }
        chosen.push(case.clone());
    }
    chosen
}

/// Every combination of indices below `dims`, the last dimension fastest.
pub fn product(dims: &[usize]) -> Vec<Vec<usize>> {
    dims.iter().fold(vec![Vec::new()], |acc, &n| {
        acc.iter().flat_map(|prefix| (0..n).map(move |i| [prefix.as_slice(), &[i]].concat())).collect()
    })
}
