//! Union-find (disjoint sets) over sparse 64-bit document ids, for connected components of
//! the duplicate graph.
//!
//! Ids are mapped to dense indices on first sight; the forest uses union by size and path
//! halving, so a sequence of m operations costs O(m α(m)).

use fxhash::FxHashMap as HashMap;

/// Disjoint sets of u64 ids.
#[derive(Default, Debug, Clone)]
pub struct UnionFind {
    index: HashMap<u64, u32>,
    ids: Vec<u64>,
    parent: Vec<u32>,
    size: Vec<u32>,
}

impl UnionFind {
    pub fn new() -> Self {
        Self::default()
    }

    fn slot(&mut self, id: u64) -> u32 {
        if let Some(&i) = self.index.get(&id) {
            return i;
        }
        let i = self.ids.len() as u32;
        self.index.insert(id, i);
        self.ids.push(id);
        self.parent.push(i);
        self.size.push(1);
        i
    }

    fn root(&mut self, mut i: u32) -> u32 {
        while self.parent[i as usize] != i {
            let grandparent = self.parent[self.parent[i as usize] as usize];
            self.parent[i as usize] = grandparent;
            i = grandparent;
        }
        i
    }

    /// Puts `a` and `b` in the same set.
    pub fn union(&mut self, a: u64, b: u64) {
        let (ia, ib) = (self.slot(a), self.slot(b));
        let (mut ra, mut rb) = (self.root(ia), self.root(ib));
        if ra == rb {
            return;
        }
        if self.size[ra as usize] < self.size[rb as usize] {
            std::mem::swap(&mut ra, &mut rb);
        }
        self.parent[rb as usize] = ra;
        self.size[ra as usize] += self.size[rb as usize];
    }

    /// A representative id of `id`'s set (`id` itself if it was never seen).
    pub fn find(&mut self, id: u64) -> u64 {
        match self.index.get(&id) {
            Some(&i) => {
                let r = self.root(i);
                self.ids[r as usize]
            }
            None => id,
        }
    }

    /// Number of ids seen.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Every seen id with the smallest id of its set, sorted by id: the canonical labelling,
    /// independent of the order of unions.
    pub fn components_by_min(&mut self) -> Vec<(u64, u64)> {
        let n = self.ids.len();
        let mut min_of_root: HashMap<u32, u64> = HashMap::default();
        for i in 0..n as u32 {
            let r = self.root(i);
            let id = self.ids[i as usize];
            min_of_root
                .entry(r)
                .and_modify(|m| *m = (*m).min(id))
                .or_insert(id);
        }
        let mut out: Vec<(u64, u64)> = (0..n as u32)
            .map(|i| {
                let r = self.root(i);
                (self.ids[i as usize], min_of_root[&r])
            })
            .collect();
        out.sort_unstable();
        out
    }
}

/// Disjoint sets of a known set of ids, given sorted before any union: 13 bytes an id (the
/// id, its parent's index and a rank), where [`UnionFind`] takes about 50 (its hash map from
/// id to index, with the vectors' spare room). An id is found by binary search. For the
/// clusters of a large corpus, whose documents are gathered (sorted on disk) before they are
/// joined.
#[derive(Debug, Clone, Default)]
pub struct SortedUnionFind {
    ids: Vec<u64>,
    parent: Vec<u32>,
    rank: Vec<u8>,
}

impl SortedUnionFind {
    /// The sets of `ids`, each alone. `ids` must be sorted and distinct.
    ///
    /// # Panics
    ///
    /// If they are not, or if there are 2^32 or more.
    pub fn new(mut ids: Vec<u64>) -> Self {
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "ids sorted and distinct"
        );
        let n = u32::try_from(ids.len()).expect("fewer than 2^32 ids");
        ids.shrink_to_fit();
        SortedUnionFind {
            ids,
            parent: (0..n).collect(),
            rank: vec![0; n as usize],
        }
    }

    fn index(&self, id: u64) -> Option<u32> {
        self.ids.binary_search(&id).ok().map(|i| i as u32)
    }

    fn root(&mut self, mut i: u32) -> u32 {
        while self.parent[i as usize] != i {
            let grandparent = self.parent[self.parent[i as usize] as usize];
            self.parent[i as usize] = grandparent;
            i = grandparent;
        }
        i
    }

    /// Puts `a` and `b` in the same set; false (and nothing changes) if either is not one
    /// of the ids.
    pub fn union(&mut self, a: u64, b: u64) -> bool {
        let (Some(ia), Some(ib)) = (self.index(a), self.index(b)) else {
            return false;
        };
        let (mut ra, mut rb) = (self.root(ia), self.root(ib));
        if ra != rb {
            if self.rank[ra as usize] < self.rank[rb as usize] {
                std::mem::swap(&mut ra, &mut rb);
            }
            self.parent[rb as usize] = ra;
            if self.rank[ra as usize] == self.rank[rb as usize] {
                self.rank[ra as usize] += 1;
            }
        }
        true
    }

    /// A representative id of `id`'s set (`id` itself if it is not one of the ids).
    pub fn find(&mut self, id: u64) -> u64 {
        match self.index(id) {
            Some(i) => {
                let r = self.root(i);
                self.ids[r as usize]
            }
            None => id,
        }
    }

    /// Number of ids.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Components by repeated relaxation of labels: slow and obviously right.
    fn brute_components(edges: &[(u64, u64)]) -> Vec<(u64, u64)> {
        let mut label: HashMap<u64, u64> = HashMap::default();
        for &(a, b) in edges {
            label.insert(a, a);
            label.insert(b, b);
        }
        loop {
            let mut changed = false;
            for &(a, b) in edges {
                let m = label[&a].min(label[&b]);
                for x in [a, b] {
                    if label[&x] != m {
                        label.insert(x, m);
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        let mut out: Vec<(u64, u64)> = label.into_iter().collect();
        out.sort_unstable();
        out
    }

    #[test]
    fn matches_brute_force() {
        let mut state = 5u64;
        for round in 0..50 {
            let edges: Vec<(u64, u64)> = (0..round * 3)
                .map(|_| {
                    let a = crate::mix::splitmix64(&mut state) % 60;
                    let b = crate::mix::splitmix64(&mut state) % 60;
                    (a * 1000, b * 1000)
                })
                .collect();
            let mut uf = UnionFind::new();
            for &(a, b) in &edges {
                uf.union(a, b);
            }
            let expected = brute_components(&edges);
            assert_eq!(uf.components_by_min(), expected);
            // The sorted version: the same sets, whatever its representatives.
            let mut ids: Vec<u64> = expected.iter().map(|&(id, _)| id).collect();
            ids.dedup();
            let mut sorted = SortedUnionFind::new(ids);
            for &(a, b) in &edges {
                assert!(sorted.union(a, b));
            }
            assert!(!sorted.union(1, 0) && sorted.find(7) == 7, "not an id");
            let mut min_of: HashMap<u64, u64> = HashMap::default();
            for &(id, _) in &expected {
                let r = sorted.find(id);
                let m = min_of.entry(r).or_insert(id);
                *m = (*m).min(id);
            }
            let labelled: Vec<(u64, u64)> = expected
                .iter()
                .map(|&(id, _)| (id, min_of[&sorted.find(id)]))
                .collect();
            assert_eq!(labelled, expected);
        }
    }
}
