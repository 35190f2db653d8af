//! Lists published to readers in chunks that successive snapshots share:
//! publishing copies only the chunks whose records changed since the last
//! snapshot (comparing costs no allocation; copying a record costs one per
//! string), so a batch that changed one node of 10,000 copies 64 records,
//! not 10,000.

use std::sync::Arc;

/// Records per chunk.
const CHUNK: usize = 64;

/// An immutable list in shared chunks (every chunk full but the last).
#[derive(Debug, Clone)]
pub struct Chunked<T> {
    chunks: Vec<Arc<[T]>>,
    len: usize,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T: Clone + PartialEq> Chunked<T> {
    /// The list of `items`, each chunk taken from `prev` where its records
    /// are the same (equal, at the same place), else copied.
    pub fn sharing<'a>(
        items: impl ExactSizeIterator<Item = &'a T>,
        prev: Option<&Chunked<T>>,
    ) -> Self
    where
        T: 'a,
    {
        Self::sharing_by(items, prev, |a, b| a == b)
    }
}

impl<T: Clone> Chunked<T> {
    /// [`Chunked::sharing`], records the same when `same` says so (for
    /// shared records, `Arc::ptr_eq`: no look inside).
    pub fn sharing_by<'a>(
        items: impl ExactSizeIterator<Item = &'a T>,
        prev: Option<&Chunked<T>>,
        same: impl Fn(&T, &T) -> bool,
    ) -> Self
    where
        T: 'a,
    {
        let len = items.len();
        let mut chunks = Vec::with_capacity(len.div_ceil(CHUNK));
        let mut part: Vec<&T> = Vec::with_capacity(CHUNK);
        let mut items = items.peekable();
        while items.peek().is_some() {
            part.clear();
            part.extend(items.by_ref().take(CHUNK));
            let k = chunks.len();
            let same = prev.and_then(|p| p.chunks.get(k)).filter(|c| {
                c.len() == part.len() && c.iter().zip(part.iter()).all(|(a, b)| same(a, b))
            });
            chunks.push(match same {
                Some(c) => c.clone(),
                None => part.iter().map(|r| (*r).clone()).collect::<Vec<T>>().into(),
            });
        }
        Chunked { chunks, len }
    }
}

impl<T> Chunked<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get(&self, i: usize) -> Option<&T> {
        self.chunks.get(i / CHUNK)?.get(i % CHUNK)
    }

    /// As a sorted slice's `binary_search_by_key`.
    pub fn binary_search_by_key<B: Ord>(
        &self,
        b: &B,
        mut f: impl FnMut(&T) -> B,
    ) -> Result<usize, usize> {
        // The chunk it would be in, then the place in it.
        let k = self
            .chunks
            .partition_point(|c| c.last().is_some_and(|x| f(x) < *b));
        match self.chunks.get(k) {
            Some(c) => c
                .binary_search_by_key(b, f)
                .map(|i| k * CHUNK + i)
                .map_err(|i| k * CHUNK + i),
            None => Err(self.len),
        }
    }

    /// Its chunks (every one full but the last).
    pub(crate) fn chunks(&self) -> &[Arc<[T]>] {
        &self.chunks
    }

    /// The list of `chunks`, which must be full but the last.
    pub(crate) fn from_chunks(chunks: Vec<Arc<[T]>>) -> Self {
        debug_assert!(chunks.iter().rev().skip(1).all(|c| c.len() == CHUNK));
        let len = chunks.iter().map(|c| c.len()).sum();
        Chunked { chunks, len }
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.chunks.iter().flat_map(|c| c.iter())
    }

    /// A copy of every record (for an answer that owns them).
    pub fn to_vec(&self) -> Vec<T>
    where
        T: Clone,
    {
        self.iter().cloned().collect()
    }

    /// Whether chunk `k` is the same allocation in both (shared).
    #[cfg(test)]
    fn shares_chunk(&self, other: &Chunked<T>, k: usize) -> bool {
        match (self.chunks.get(k), other.chunks.get(k)) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl<T> std::ops::Index<usize> for Chunked<T> {
    type Output = T;
    fn index(&self, i: usize) -> &T {
        &self.chunks[i / CHUNK][i % CHUNK]
    }
}

/// One chunk's records.
fn chunk_iter<T>(c: &Arc<[T]>) -> std::slice::Iter<'_, T> {
    c.iter()
}

type ChunkIter<'a, T> = std::iter::FlatMap<
    std::slice::Iter<'a, Arc<[T]>>,
    std::slice::Iter<'a, T>,
    fn(&'a Arc<[T]>) -> std::slice::Iter<'a, T>,
>;

impl<'a, T> IntoIterator for &'a Chunked<T> {
    type Item = &'a T;
    type IntoIter = ChunkIter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.chunks
            .iter()
            .flat_map(chunk_iter as fn(&'a Arc<[T]>) -> std::slice::Iter<'a, T>)
    }
}

impl<T> FromIterator<T> for Chunked<T> {
    fn from_iter<I: IntoIterator<Item = T>>(it: I) -> Self {
        let all: Vec<T> = it.into_iter().collect();
        let len = all.len();
        let mut chunks = Vec::with_capacity(len.div_ceil(CHUNK));
        let mut rest = all.into_iter().peekable();
        while rest.peek().is_some() {
            chunks.push(rest.by_ref().take(CHUNK).collect::<Vec<T>>().into());
        }
        Chunked { chunks, len }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unchanged_chunks_are_shared_and_changed_ones_copied() {
        let a: Vec<u32> = (0..200).collect();
        let first = Chunked::sharing(a.iter(), None);
        assert_eq!(first.len(), 200);
        assert_eq!(first.to_vec(), a);
        assert_eq!(first.get(130), Some(&130));
        assert_eq!(first[199], 199);
        assert_eq!(first.get(200), None);
        // One record changed (in the third chunk): only it is copied.
        let mut b = a.clone();
        b[150] = 9999;
        let second = Chunked::sharing(b.iter(), Some(&first));
        assert_eq!(second.to_vec(), b);
        assert!(second.shares_chunk(&first, 0) && second.shares_chunk(&first, 1));
        assert!(!second.shares_chunk(&first, 2));
        assert!(second.shares_chunk(&first, 3), "the short last chunk too");
        // Grown by one: the last chunk is new, the others shared.
        b.push(200);
        let third = Chunked::sharing(b.iter(), Some(&second));
        assert_eq!(third.iter().copied().collect::<Vec<_>>(), b);
        assert!(third.shares_chunk(&second, 2) && !third.shares_chunk(&second, 3));
        // Shrunk to nothing.
        let empty = Chunked::<u32>::sharing([].iter(), Some(&third));
        assert!(empty.is_empty() && empty.iter().next().is_none());
        let collected: Chunked<u32> = (0..130).collect();
        assert_eq!((&collected).into_iter().count(), 130);
        assert_eq!(collected[129], 129);
        // Searched as a slice is.
        let odd: Vec<u32> = (0..300).map(|i| 2 * i + 1).collect();
        let c: Chunked<u32> = odd.iter().copied().collect();
        for x in 0..602u32 {
            assert_eq!(
                c.binary_search_by_key(&x, |v| *v),
                odd.binary_search_by_key(&x, |v| *v),
                "{x}"
            );
        }
    }

    #[test]
    fn shared_records_are_compared_by_the_given_sameness() {
        let recs: Vec<Arc<String>> = (0..100).map(|i| Arc::new(i.to_string())).collect();
        let first = Chunked::sharing_by(recs.iter(), None, Arc::ptr_eq);
        // An equal record in a new allocation is a change by pointer.
        let mut again = recs.clone();
        again[70] = Arc::new("70".to_string());
        let second = Chunked::sharing_by(again.iter(), Some(&first), Arc::ptr_eq);
        assert!(second.shares_chunk(&first, 0) && !second.shares_chunk(&first, 1));
    }
}
