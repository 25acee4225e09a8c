//! The Merkle tree over a log's records (RFC 6962 / RFC 9162 hashing): leaf and node
//! hashes, the compact range the writer keeps, and inclusion and consistency proofs.
//!
//! Leaf `i` is the record with seq `i + 1`; its data is the record's line exactly as
//! stored, without the newline. Pure: no I/O.

use fsgate_base::sha256::Sha256;

/// A SHA-256 digest.
pub(crate) type Hash = [u8; 32];

/// `SHA-256(0x00 || line)`: the hash of one record as a leaf.
pub(crate) fn leaf_hash(line: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([0u8]);
    h.update(line);
    h.finalize()
}

/// `SHA-256(0x01 || left || right)`: an interior node.
pub(crate) fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update([1u8]);
    h.update(left);
    h.update(right);
    h.finalize()
}

/// The hash of the empty tree, `SHA-256()`.
pub(crate) fn empty_root() -> Hash {
    Sha256::digest([])
}

/// The largest power of two strictly below `n` (`n >= 2`).
fn split(n: usize) -> usize {
    let mut k = 1;
    while k << 1 < n {
        k <<= 1;
    }
    k
}

/// MTH over leaf hashes.
pub(crate) fn root_of(leaves: &[Hash]) -> Hash {
    match leaves.len() {
        0 => empty_root(),
        1 => leaves[0],
        n => {
            let k = split(n);
            node_hash(&root_of(&leaves[..k]), &root_of(&leaves[k..]))
        }
    }
}

/// The right border of a tree: the roots of its perfect subtrees, largest (leftmost)
/// first, as the writer keeps it. Appending a leaf costs one hash, amortised.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CompactRange {
    /// Number of leaves.
    size: u64,
    /// One root per set bit of `size`, from the highest bit down.
    nodes: Vec<Hash>,
}

impl CompactRange {
    /// The range of a tree of `size` leaves from its border nodes; `None` if their
    /// number does not match `size`.
    pub(crate) fn from_parts(size: u64, nodes: Vec<Hash>) -> Option<Self> {
        (size.count_ones() as usize == nodes.len()).then_some(CompactRange { size, nodes })
    }

    /// Number of leaves.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// The border nodes, largest subtree first.
    pub(crate) fn nodes(&self) -> &[Hash] {
        &self.nodes
    }

    /// Appends one leaf hash.
    pub(crate) fn push(&mut self, leaf: Hash) {
        let mut node = leaf;
        // Each trailing one bit of the old size is a subtree of the new one's height.
        let mut carry = self.size;
        while carry & 1 == 1 {
            if let Some(left) = self.nodes.pop() {
                node = node_hash(&left, &node);
            }
            carry >>= 1;
        }
        self.nodes.push(node);
        self.size += 1;
    }

    /// The tree's root (MTH).
    pub(crate) fn root(&self) -> Hash {
        let mut iter = self.nodes.iter().rev();
        let Some(last) = iter.next() else {
            return empty_root();
        };
        iter.fold(*last, |acc, left| node_hash(left, &acc))
    }
}

/// The inclusion path of leaf `index` in the tree over `leaves` (RFC 6962 PATH).
pub(crate) fn inclusion_proof(leaves: &[Hash], index: usize) -> Option<Vec<Hash>> {
    if index >= leaves.len() {
        return None;
    }
    let mut out = Vec::new();
    path(index, leaves, &mut out);
    Some(out)
}

fn path(m: usize, leaves: &[Hash], out: &mut Vec<Hash>) {
    let n = leaves.len();
    if n <= 1 {
        return;
    }
    let k = split(n);
    if m < k {
        path(m, &leaves[..k], out);
        out.push(root_of(&leaves[k..]));
    } else {
        path(m - k, &leaves[k..], out);
        out.push(root_of(&leaves[..k]));
    }
}

/// Checks an inclusion path (RFC 9162 section 2.1.3.2).
pub(crate) fn verify_inclusion(
    leaf: &Hash,
    index: u64,
    size: u64,
    proof: &[Hash],
    root: &Hash,
) -> bool {
    if index >= size {
        return false;
    }
    let (mut fnode, mut snode) = (index, size - 1);
    let mut r = *leaf;
    for p in proof {
        if snode == 0 {
            return false;
        }
        if fnode & 1 == 1 || fnode == snode {
            r = node_hash(p, &r);
            while fnode & 1 == 0 && fnode != 0 {
                fnode >>= 1;
                snode >>= 1;
            }
        } else {
            r = node_hash(&r, p);
        }
        fnode >>= 1;
        snode >>= 1;
    }
    snode == 0 && &r == root
}

/// The consistency proof from the tree of the first `old` leaves to the tree over all
/// of `leaves` (RFC 6962 PROOF); `None` unless `0 < old <= leaves.len()`.
pub(crate) fn consistency_proof(leaves: &[Hash], old: usize) -> Option<Vec<Hash>> {
    if old == 0 || old > leaves.len() {
        return None;
    }
    let mut out = Vec::new();
    subproof(old, leaves, true, &mut out);
    Some(out)
}

fn subproof(m: usize, leaves: &[Hash], whole: bool, out: &mut Vec<Hash>) {
    let n = leaves.len();
    if m == n {
        if !whole {
            out.push(root_of(leaves));
        }
        return;
    }
    let k = split(n);
    if m <= k {
        subproof(m, &leaves[..k], whole, out);
        out.push(root_of(&leaves[k..]));
    } else {
        subproof(m - k, &leaves[k..], false, out);
        out.push(root_of(&leaves[..k]));
    }
}

/// Checks a consistency proof between two tree heads (RFC 9162 section 2.1.4.2).
pub(crate) fn verify_consistency(
    old_size: u64,
    new_size: u64,
    old_root: &Hash,
    new_root: &Hash,
    proof: &[Hash],
) -> bool {
    if old_size == 0 || old_size > new_size {
        return false;
    }
    if old_size == new_size {
        return proof.is_empty() && old_root == new_root;
    }
    let mut path: Vec<Hash> = Vec::with_capacity(proof.len() + 1);
    if old_size.is_power_of_two() {
        path.push(*old_root);
    }
    path.extend_from_slice(proof);
    let Some((first, rest)) = path.split_first() else {
        return false;
    };
    let (mut fnode, mut snode) = (old_size - 1, new_size - 1);
    while fnode & 1 == 1 {
        fnode >>= 1;
        snode >>= 1;
    }
    let (mut fr, mut sr) = (*first, *first);
    for c in rest {
        if snode == 0 {
            return false;
        }
        if fnode & 1 == 1 || fnode == snode {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            while fnode & 1 == 0 && fnode != 0 {
                fnode >>= 1;
                snode >>= 1;
            }
        } else {
            sr = node_hash(&sr, c);
        }
        fnode >>= 1;
        snode >>= 1;
    }
    snode == 0 && &fr == old_root && &sr == new_root
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn leaves(n: usize) -> Vec<Hash> {
        (0..n)
            .map(|i| leaf_hash(format!("r{i}").as_bytes()))
            .collect()
    }

    #[test]
    fn known_roots_match_rfc6962_shape() {
        // One leaf: the root is the leaf hash; two: one node over both.
        let l = leaves(3);
        assert_eq!(root_of(&l[..1]), l[0]);
        assert_eq!(root_of(&l[..2]), node_hash(&l[0], &l[1]));
        assert_eq!(root_of(&l), node_hash(&node_hash(&l[0], &l[1]), &l[2]));
        assert_eq!(
            hex::encode(empty_root()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            hex::encode(leaf_hash(b"")),
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
        );
    }

    proptest! {
        #[test]
        fn the_compact_range_has_the_trees_root(n in 0usize..300) {
            let l = leaves(n);
            let mut cr = CompactRange::default();
            for h in &l {
                cr.push(*h);
            }
            prop_assert_eq!(cr.root(), root_of(&l));
            prop_assert_eq!(cr.nodes().len(), n.count_ones() as usize);
            let again = CompactRange::from_parts(n as u64, cr.nodes().to_vec());
            prop_assert_eq!(again.as_ref(), Some(&cr));
        }

        #[test]
        fn inclusion_proofs_verify_and_tampering_fails(n in 1usize..200, pick in 0usize..200) {
            let l = leaves(n);
            let i = pick % n;
            let root = root_of(&l);
            let proof = inclusion_proof(&l, i).unwrap_or_default();
            prop_assert!(verify_inclusion(&l[i], i as u64, n as u64, &proof, &root));
            let wrong = leaf_hash(b"not a record");
            prop_assert!(!verify_inclusion(&wrong, i as u64, n as u64, &proof, &root));
            // Another tree's root (one more leaf) does not verify.
            let mut more = l.clone();
            more.push(leaf_hash(b"later"));
            prop_assert!(!verify_inclusion(&l[i], i as u64, n as u64, &proof, &root_of(&more)));
            if n > 1 {
                prop_assert!(!verify_inclusion(&l[i], ((i + 1) % n) as u64, n as u64, &proof, &root));
                let mut bent = proof.clone();
                bent[0][0] ^= 1;
                prop_assert!(!verify_inclusion(&l[i], i as u64, n as u64, &bent, &root));
            }
        }

        #[test]
        fn consistency_proofs_verify_and_tampering_fails(n in 1usize..200, pick in 0usize..200) {
            let l = leaves(n);
            let m = pick % n + 1;
            let (old, new) = (root_of(&l[..m]), root_of(&l));
            let proof = consistency_proof(&l, m).unwrap_or_default();
            prop_assert!(verify_consistency(m as u64, n as u64, &old, &new, &proof));
            let other = leaf_hash(b"forged");
            prop_assert!(!verify_consistency(m as u64, n as u64, &other, &new, &proof));
            prop_assert!(!verify_consistency(m as u64, n as u64, &old, &other, &proof));
            if !proof.is_empty() {
                let mut bent = proof.clone();
                bent[0][31] ^= 0x80;
                prop_assert!(!verify_consistency(m as u64, n as u64, &old, &new, &bent));
            }
        }
    }
}
