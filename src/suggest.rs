//! Did-you-mean: the one edit distance and nearest-candidate search behind every suggestion the
//! tool makes (backends, build.toml keys, licence ids, gfx targets, systems, variant names).
//!
//! The distance is optimal string alignment (strsim's `osa_distance`): a swap of two neighbours
//! is one edit, the commonest typo. Each caller picks how far a suggestion may be, because a
//! short word is within two edits of almost anything.

/// The edit distance every suggestion uses.
pub fn distance(a: &str, b: &str) -> usize {
    strsim::osa_distance(a, b)
}

/// The candidate nearest to `input`, at most `max` edits away; of equally near ones, the first.
pub fn nearest<'a>(
    input: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    max: usize,
) -> Option<&'a str> {
    nearest_by(input, candidates, max, str::to_owned)
}

/// [`nearest`], comparing `input` with each candidate as `normalize` rewrites it (`input` is
/// taken as already normalised): lower case, `_` for `-`, ….
pub fn nearest_by<'a>(
    input: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    max: usize,
    normalize: impl Fn(&str) -> String,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (distance(input, &normalize(c)), c))
        .filter(|(d, _)| *d <= max)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_swap_is_one_edit_and_ties_go_to_the_first() {
        assert_eq!(distance("cdua", "cuda"), 1);
        assert_eq!(nearest("cdua", ["rocm", "cuda"], 1), Some("cuda"));
        assert_eq!(nearest("xx", ["ab", "cd"], 2), Some("ab"));
        assert_eq!(nearest("metl", ["rocm", "cuda"], 2), None);
        assert_eq!(
            nearest_by("cuda_arch", ["CUDA-ARCH"], 1, |c| c.to_ascii_lowercase().replace('-', "_")),
            Some("CUDA-ARCH")
        );
    }
}
