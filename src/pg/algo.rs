//! The collective algorithms, over any [`Channel`].
//!
//! Ranks take part by their position among the active members (`members`, sorted
//! in-group ranks; `me` indexes it). Buffers indexed by rank (all-gather's output,
//! all-to-all's counts) are indexed by in-group rank: holes left by inactive ranks
//! keep their place and are neither read nor written.
//!
//! Messages that fit one chunk take one round: every rank sends to every rank that
//! needs its data and reduces what arrives in member order, so every rank computes
//! the same bits. Larger ones take bandwidth-optimal paths: ring reduce-scatter and
//! ring all-gather (each rank sends `2 (n-1)/n` of the buffer), a chunk-pipelined
//! chain for broadcast; the channel interleaves each step's send and receive chunk by
//! chunk, so copies into peers and reductions of what arrived overlap.

use super::channel::{Channel, OpKind, Recv};
use super::dtype::{self, DType, ReduceOp};
use super::error::{PgError, PgResult};

/// The group as one operation sees it.
pub struct Ring<'a, C: Channel + ?Sized> {
    /// The wire.
    pub ch: &'a mut C,
    /// Active in-group ranks, ascending.
    pub members: &'a [usize],
    /// This rank's index in `members`.
    pub me: usize,
}

impl<C: Channel + ?Sized> Ring<'_, C> {
    fn n(&self) -> usize {
        self.members.len()
    }

    fn next(&self) -> usize {
        self.members[(self.me + 1) % self.n()]
    }

    fn prev(&self) -> usize {
        self.members[(self.me + self.n() - 1) % self.n()]
    }

    /// Whether `len` bytes go in one round.
    fn small(&self, len: usize) -> bool {
        len <= self.ch.chunk_bytes().min(SMALL_MAX) || self.n() <= 1
    }

    /// Blocks until every active rank arrived.
    pub fn barrier(&mut self) -> PgResult<()> {
        let peers: Vec<usize> = self.peers().collect();
        let sends: Vec<(usize, &[u8])> = peers.iter().map(|&p| (p, &[][..])).collect();
        let recvs: Vec<Recv> = peers.iter().map(|&p| (p, 0)).collect();
        self.ch
            .exchange(OpKind::Barrier, &sends, &recvs, &mut |_, _, _| {})
    }

    fn peers(&self) -> impl Iterator<Item = usize> + '_ {
        let me = self.members[self.me];
        self.members.iter().copied().filter(move |&p| p != me)
    }

    /// Copies `buf` of member index `root` to every member.
    pub fn broadcast(&mut self, buf: &mut [u8], root: usize) -> PgResult<()> {
        if self.n() <= 1 {
            return Ok(());
        }
        if self.small(buf.len()) {
            if self.me == root {
                let sends: Vec<(usize, &[u8])> = self.peers().map(|p| (p, &buf[..])).collect();
                return self
                    .ch
                    .exchange(OpKind::Broadcast, &sends, &[], &mut |_, _, _| {});
            }
            let from = self.members[root];
            return self.ch.exchange(
                OpKind::Broadcast,
                &[],
                &[(from, buf.len())],
                &mut |_, off, bytes| buf[off..off + bytes.len()].copy_from_slice(bytes),
            );
        }
        // A chain from the root through the members in order, one block behind per hop.
        let n = self.n();
        let pos = (self.me + n - root) % n;
        let block = self.ch.chunk_bytes();
        let blocks = buf.len().div_ceil(block);
        let total = buf.len();
        let range = |k: usize| k * block..((k + 1) * block).min(total);
        let (prev, next) = (self.prev(), self.next());
        for k in 0..=blocks {
            let forward = k >= 1 && pos + 1 < n;
            let receive = k < blocks && pos > 0;
            let (send_part, recv_part) = if forward && receive {
                let (done, rest) = buf.split_at_mut(range(k).start);
                (Some(&done[range(k - 1)]), Some(&mut rest[..range(k).len()]))
            } else if forward {
                (Some(&buf[range(k - 1)]), None)
            } else if receive {
                let r = range(k);
                (None, Some(&mut buf[r]))
            } else {
                (None, None)
            };
            let sends: Vec<(usize, &[u8])> = send_part.map(|s| (next, s)).into_iter().collect();
            let recvs: Vec<Recv> = recv_part
                .as_ref()
                .map(|r| (prev, r.len()))
                .into_iter()
                .collect();
            let mut into = recv_part;
            self.ch
                .exchange(OpKind::Broadcast, &sends, &recvs, &mut |_, off, bytes| {
                    if let Some(dst) = into.as_deref_mut() {
                        dst[off..off + bytes.len()].copy_from_slice(bytes);
                    }
                })?;
        }
        Ok(())
    }

    /// Reduces `buf` across every member, in place on every member.
    pub fn all_reduce(&mut self, buf: &mut [u8], dtype: DType, op: ReduceOp) -> PgResult<()> {
        check_elements(buf.len(), dtype)?;
        if self.n() > 1 {
            if self.small(buf.len()) {
                let all = self.gather_all(OpKind::AllReduce, buf)?;
                fold_in_order(&all, buf, dtype, op);
            } else {
                self.ring_reduce_scatter(OpKind::AllReduce, buf, dtype, op)?;
                self.ring_all_gather_segments(buf, dtype)?;
            }
        }
        finish_average(buf, dtype, op, self.n());
        Ok(())
    }

    /// Reduces every member's `buf` into member index `root`'s `buf`; other members'
    /// buffers are left as they were.
    pub fn reduce(
        &mut self,
        buf: &mut [u8],
        dtype: DType,
        op: ReduceOp,
        root: usize,
    ) -> PgResult<()> {
        check_elements(buf.len(), dtype)?;
        if self.n() <= 1 {
            finish_average(buf, dtype, op, 1);
            return Ok(());
        }
        let root_rank = self.members[root];
        if self.small(buf.len()) {
            if self.me != root {
                return self.ch.exchange(
                    OpKind::Reduce,
                    &[(root_rank, buf)],
                    &[],
                    &mut |_, _, _| {},
                );
            }
            let mut all = vec![Vec::new(); self.n()];
            all[self.me] = buf.to_vec();
            self.receive_from_all(OpKind::Reduce, buf.len(), &mut all)?;
            fold_in_order(&all, buf, dtype, op);
            finish_average(buf, dtype, op, self.n());
            return Ok(());
        }
        // Ring reduce-scatter on a copy, then each member's reduced segment to the root.
        let mut work = buf.to_vec();
        self.ring_reduce_scatter(OpKind::Reduce, &mut work, dtype, op)?;
        let n = self.n();
        let segs = segments(work.len() / dtype.size(), n, dtype.size());
        let owned = (self.me + 1) % n;
        if self.me != root {
            let seg = segs[owned].clone();
            self.ch.exchange(
                OpKind::Reduce,
                &[(root_rank, &work[seg])],
                &[],
                &mut |_, _, _| {},
            )?;
            return Ok(());
        }
        let from: Vec<(usize, std::ops::Range<usize>)> = (0..n)
            .filter(|&i| i != self.me)
            .map(|i| (self.members[i], segs[(i + 1) % n].clone()))
            .collect();
        let recvs: Vec<Recv> = from.iter().map(|(p, r)| (*p, r.len())).collect();
        self.ch
            .exchange(OpKind::Reduce, &[], &recvs, &mut |i, off, bytes| {
                let start = from[i].1.start + off;
                work[start..start + bytes.len()].copy_from_slice(bytes);
            })?;
        buf.copy_from_slice(&work);
        finish_average(buf, dtype, op, n);
        Ok(())
    }

    /// Every member's `input` into `output`, at `input.len() * rank` for each active
    /// in-group rank (`output` covers the group's size).
    pub fn all_gather(&mut self, input: &[u8], output: &mut [u8]) -> PgResult<()> {
        let len = input.len();
        let slots = self.members.last().map_or(0, |m| m + 1);
        if output.len() < len * slots {
            return Err(PgError::invalid(format!(
                "all_gather output holds {} bytes; {} ranks of {} bytes need {}",
                output.len(),
                slots,
                len,
                len * slots
            )));
        }
        let me = self.members[self.me];
        output[me * len..(me + 1) * len].copy_from_slice(input);
        if self.n() <= 1 {
            return Ok(());
        }
        if self.small(len) {
            let peers: Vec<usize> = self.peers().collect();
            let sends: Vec<(usize, &[u8])> = peers.iter().map(|&p| (p, input)).collect();
            let recvs: Vec<Recv> = peers.iter().map(|&p| (p, len)).collect();
            return self
                .ch
                .exchange(OpKind::AllGather, &sends, &recvs, &mut |i, off, bytes| {
                    let start = peers[i] * len + off;
                    output[start..start + bytes.len()].copy_from_slice(bytes);
                });
        }
        // Ring: at step s pass on the block that arrived at step s - 1.
        let n = self.n();
        let (prev, next) = (self.prev(), self.next());
        for s in 0..n - 1 {
            let send_rank = self.members[(self.me + n - s) % n];
            let recv_rank = self.members[(self.me + 2 * n - s - 1) % n];
            let (send, recv) = disjoint(output, send_rank * len, recv_rank * len, len);
            self.ch.exchange(
                OpKind::AllGather,
                &[(next, send)],
                &[(prev, len)],
                &mut |_, off, bytes| recv[off..off + bytes.len()].copy_from_slice(bytes),
            )?;
        }
        Ok(())
    }

    /// Reduces `input` (one block of `output.len()` bytes per in-group rank) across
    /// members and leaves this rank's block of the result in `output`.
    pub fn reduce_scatter(
        &mut self,
        input: &[u8],
        output: &mut [u8],
        dtype: DType,
        op: ReduceOp,
    ) -> PgResult<()> {
        let len = output.len();
        check_elements(len, dtype)?;
        let slots = self.members.last().map_or(0, |m| m + 1);
        if input.len() < len * slots {
            return Err(PgError::invalid(format!(
                "reduce_scatter input holds {} bytes; {} ranks of {} bytes need {}",
                input.len(),
                slots,
                len,
                len * slots
            )));
        }
        let me = self.members[self.me];
        let block = |rank: usize| &input[rank * len..(rank + 1) * len];
        if self.n() <= 1 || self.small(len * self.n()) {
            let peers: Vec<usize> = self.peers().collect();
            let sends: Vec<(usize, &[u8])> = peers.iter().map(|&p| (p, block(p))).collect();
            let mut all = vec![Vec::new(); self.n()];
            all[self.me] = block(me).to_vec();
            let recvs: Vec<Recv> = peers.iter().map(|&p| (p, len)).collect();
            let index: Vec<usize> = peers
                .iter()
                .map(|p| self.members.iter().position(|m| m == p).unwrap_or(0))
                .collect();
            for &i in &index {
                all[i] = vec![0; len];
            }
            self.ch.exchange(
                OpKind::ReduceScatter,
                &sends,
                &recvs,
                &mut |i, off, bytes| {
                    all[index[i]][off..off + bytes.len()].copy_from_slice(bytes);
                },
            )?;
            fold_in_order(&all, output, dtype, op);
            finish_average(output, dtype, op, self.n());
            return Ok(());
        }
        // The members' blocks side by side in member order, reduced by the ring.
        let n = self.n();
        let mut work = Vec::with_capacity(len * n);
        for &m in self.members {
            work.extend_from_slice(block(m));
        }
        // Segment j of the ring is block j - 1, so member index i ends up holding the
        // full reduction of its own block.
        self.ring_steps(OpKind::ReduceScatter, &mut work, dtype, op, |j| {
            let b = (j + n - 1) % n;
            b * len..(b + 1) * len
        })?;
        output.copy_from_slice(&work[self.me * len..(self.me + 1) * len]);
        finish_average(output, dtype, op, n);
        Ok(())
    }

    /// All-to-all: `send_counts[r]` bytes of `input` (in rank order) to each active
    /// rank `r`, `recv_counts[r]` bytes from each into `output` (in rank order).
    pub fn all_to_all(
        &mut self,
        input: &[u8],
        send_counts: &[usize],
        output: &mut [u8],
        recv_counts: &[usize],
    ) -> PgResult<()> {
        let send_offsets = offsets(send_counts, input.len(), "input")?;
        let recv_offsets = offsets(recv_counts, output.len(), "output")?;
        let me = self.members[self.me];
        let slots = self.members.last().map_or(0, |m| m + 1);
        if send_counts.len() < slots || recv_counts.len() < slots {
            return Err(PgError::invalid(format!(
                "all_to_all needs counts for {slots} ranks"
            )));
        }
        let own = &input[send_offsets[me]..send_offsets[me] + send_counts[me]];
        if send_counts[me] != recv_counts[me] {
            return Err(PgError::invalid(format!(
                "all_to_all sends {} bytes to itself but expects {}",
                send_counts[me], recv_counts[me]
            )));
        }
        output[recv_offsets[me]..recv_offsets[me] + recv_counts[me]].copy_from_slice(own);
        let peers: Vec<usize> = self.peers().collect();
        let sends: Vec<(usize, &[u8])> = peers
            .iter()
            .map(|&p| (p, &input[send_offsets[p]..send_offsets[p] + send_counts[p]]))
            .collect();
        let recvs: Vec<Recv> = peers.iter().map(|&p| (p, recv_counts[p])).collect();
        self.ch
            .exchange(OpKind::AllToAll, &sends, &recvs, &mut |i, off, bytes| {
                let start = recv_offsets[peers[i]] + off;
                output[start..start + bytes.len()].copy_from_slice(bytes);
            })
    }

    /// Every member's `input` to member index `root`'s `output`, at
    /// `input.len() * rank` for each active in-group rank.
    pub fn gather(&mut self, input: &[u8], output: &mut [u8], root: usize) -> PgResult<()> {
        let len = input.len();
        let root_rank = self.members[root];
        if self.me != root {
            return self.ch.exchange(
                OpKind::Gather,
                &[(root_rank, input)],
                &[],
                &mut |_, _, _| {},
            );
        }
        let slots = self.members.last().map_or(0, |m| m + 1);
        if output.len() < len * slots {
            return Err(PgError::invalid(format!(
                "gather output holds {} bytes; {} ranks of {} bytes need {}",
                output.len(),
                slots,
                len,
                len * slots
            )));
        }
        output[root_rank * len..(root_rank + 1) * len].copy_from_slice(input);
        let peers: Vec<usize> = self.peers().collect();
        let recvs: Vec<Recv> = peers.iter().map(|&p| (p, len)).collect();
        self.ch
            .exchange(OpKind::Gather, &[], &recvs, &mut |i, off, bytes| {
                let start = peers[i] * len + off;
                output[start..start + bytes.len()].copy_from_slice(bytes);
            })
    }

    /// Member index `root`'s `input` (one block of `output.len()` bytes per in-group
    /// rank) scattered: each member gets its block in `output`.
    pub fn scatter(&mut self, input: &[u8], output: &mut [u8], root: usize) -> PgResult<()> {
        let len = output.len();
        let root_rank = self.members[root];
        if self.me != root {
            return self.ch.exchange(
                OpKind::Scatter,
                &[],
                &[(root_rank, len)],
                &mut |_, off, bytes| output[off..off + bytes.len()].copy_from_slice(bytes),
            );
        }
        let slots = self.members.last().map_or(0, |m| m + 1);
        if input.len() < len * slots {
            return Err(PgError::invalid(format!(
                "scatter input holds {} bytes; {} ranks of {} bytes need {}",
                input.len(),
                slots,
                len,
                len * slots
            )));
        }
        output.copy_from_slice(&input[root_rank * len..(root_rank + 1) * len]);
        let sends: Vec<(usize, &[u8])> = self
            .peers()
            .map(|p| (p, &input[p * len..(p + 1) * len]))
            .collect();
        self.ch
            .exchange(OpKind::Scatter, &sends, &[], &mut |_, _, _| {})
    }

    /// Sends `data` to in-group rank `to`.
    pub fn send(&mut self, data: &[u8], to: usize) -> PgResult<()> {
        self.ch
            .exchange(OpKind::PointToPoint, &[(to, data)], &[], &mut |_, _, _| {})
    }

    /// Receives exactly `buf.len()` bytes from in-group rank `from`.
    pub fn recv(&mut self, buf: &mut [u8], from: usize) -> PgResult<()> {
        self.ch.exchange(
            OpKind::PointToPoint,
            &[],
            &[(from, buf.len())],
            &mut |_, off, bytes| buf[off..off + bytes.len()].copy_from_slice(bytes),
        )
    }

    /// Every member's `buf` to every member, in member order (one round).
    fn gather_all(&mut self, kind: OpKind, buf: &[u8]) -> PgResult<Vec<Vec<u8>>> {
        let peers: Vec<usize> = self.peers().collect();
        let sends: Vec<(usize, &[u8])> = peers.iter().map(|&p| (p, buf)).collect();
        let mut all = vec![Vec::new(); self.n()];
        all[self.me] = buf.to_vec();
        for (i, slot) in all.iter_mut().enumerate() {
            if i != self.me {
                *slot = vec![0; buf.len()];
            }
        }
        let index: Vec<usize> = (0..self.n()).filter(|&i| i != self.me).collect();
        let recvs: Vec<Recv> = peers.iter().map(|&p| (p, buf.len())).collect();
        self.ch
            .exchange(kind, &sends, &recvs, &mut |i, off, bytes| {
                all[index[i]][off..off + bytes.len()].copy_from_slice(bytes);
            })?;
        Ok(all)
    }

    /// Receives `len` bytes from every other member into `all` (member order).
    fn receive_from_all(&mut self, kind: OpKind, len: usize, all: &mut [Vec<u8>]) -> PgResult<()> {
        let index: Vec<usize> = (0..self.n()).filter(|&i| i != self.me).collect();
        for &i in &index {
            all[i] = vec![0; len];
        }
        let recvs: Vec<Recv> = index.iter().map(|&i| (self.members[i], len)).collect();
        self.ch.exchange(kind, &[], &recvs, &mut |i, off, bytes| {
            all[index[i]][off..off + bytes.len()].copy_from_slice(bytes);
        })
    }

    /// Ring reduce-scatter of `buf` over `n` element-aligned segments: afterwards
    /// member index i holds the full reduction of segment (i + 1) % n.
    fn ring_reduce_scatter(
        &mut self,
        kind: OpKind,
        buf: &mut [u8],
        dtype: DType,
        op: ReduceOp,
    ) -> PgResult<()> {
        let n = self.n();
        let segs = segments(buf.len() / dtype.size(), n, dtype.size());
        self.ring_steps(kind, buf, dtype, op, |i| segs[i].clone())
    }

    /// The n - 1 steps of a ring reduce-scatter over the segments `seg(0..n)`: member
    /// index i ends up holding the full reduction of `seg((i + 1) % n)`.
    fn ring_steps(
        &mut self,
        kind: OpKind,
        buf: &mut [u8],
        dtype: DType,
        op: ReduceOp,
        seg: impl Fn(usize) -> std::ops::Range<usize>,
    ) -> PgResult<()> {
        let n = self.n();
        let (prev, next) = (self.prev(), self.next());
        for s in 0..n - 1 {
            let send = seg((self.me + n - s) % n);
            let recv = seg((self.me + 2 * n - s - 1) % n);
            let (send_part, recv_part) =
                disjoint(buf, send.start, recv.start, send.len().max(recv.len()));
            let send_part = &send_part[..send.len()];
            let recv_part = &mut recv_part[..recv.len()];
            self.ch.exchange(
                kind,
                &[(next, send_part)],
                &[(prev, recv.len())],
                &mut |_, off, bytes| {
                    dtype::fold(dtype, op, &mut recv_part[off..off + bytes.len()], bytes)
                },
            )?;
        }
        Ok(())
    }

    /// Ring all-gather of the segments `ring_reduce_scatter` left reduced.
    fn ring_all_gather_segments(&mut self, buf: &mut [u8], dtype: DType) -> PgResult<()> {
        let n = self.n();
        let segs = segments(buf.len() / dtype.size(), n, dtype.size());
        let (prev, next) = (self.prev(), self.next());
        for s in 0..n - 1 {
            let send = segs[(self.me + 1 + n - s) % n].clone();
            let recv = segs[(self.me + n - s) % n].clone();
            let (send_part, recv_part) =
                disjoint(buf, send.start, recv.start, send.len().max(recv.len()));
            let send_part = &send_part[..send.len()];
            let recv_part = &mut recv_part[..recv.len()];
            self.ch.exchange(
                OpKind::AllReduce,
                &[(next, send_part)],
                &[(prev, recv.len())],
                &mut |_, off, bytes| recv_part[off..off + bytes.len()].copy_from_slice(bytes),
            )?;
        }
        Ok(())
    }
}

/// Messages up to this size take the one-round algorithms (when they fit a chunk).
pub const SMALL_MAX: usize = 64 << 10;

/// `n` segments of `count` elements of `size` bytes, as even as elements allow.
fn segments(count: usize, n: usize, size: usize) -> Vec<std::ops::Range<usize>> {
    (0..n)
        .map(|i| (i * count / n) * size..((i + 1) * count / n) * size)
        .collect()
}

/// Two non-overlapping views of `buf`: up to `len` bytes at `read` and up to `len` at
/// `write` (each cut at the other's start or the buffer's end).
fn disjoint(buf: &mut [u8], read: usize, write: usize, len: usize) -> (&[u8], &mut [u8]) {
    if read < write {
        let (left, right) = buf.split_at_mut(write);
        let end = (read + len).min(left.len());
        let wlen = len.min(right.len());
        (&left[read..end], &mut right[..wlen])
    } else {
        let (left, right) = buf.split_at_mut(read);
        let wend = (write + len).min(left.len());
        let rlen = len.min(right.len());
        (&right[..rlen], &mut left[write..wend])
    }
}

fn check_elements(len: usize, dtype: DType) -> PgResult<()> {
    if len % dtype.size() != 0 {
        return Err(PgError::invalid(format!(
            "{len} bytes is not a whole number of {} elements",
            dtype.name()
        )));
    }
    Ok(())
}

/// `out = all[0] op all[1] op ...` (member order, so every rank gets the same bits).
fn fold_in_order(all: &[Vec<u8>], out: &mut [u8], dtype: DType, op: ReduceOp) {
    out.copy_from_slice(&all[0]);
    for other in &all[1..] {
        dtype::fold(dtype, op, out, other);
    }
}

fn finish_average(buf: &mut [u8], dtype: DType, op: ReduceOp, n: usize) {
    if op == ReduceOp::Avg {
        dtype::divide(dtype, buf, n);
    }
}

/// Start offsets of consecutive blocks of `counts` bytes within `total` bytes.
fn offsets(counts: &[usize], total: usize, what: &str) -> PgResult<Vec<usize>> {
    let mut at = 0usize;
    let mut out = Vec::with_capacity(counts.len());
    for &c in counts {
        out.push(at);
        at = at
            .checked_add(c)
            .ok_or_else(|| PgError::invalid(format!("all_to_all {what} counts overflow")))?;
    }
    if at > total {
        return Err(PgError::invalid(format!(
            "all_to_all {what} counts add up to {at} bytes but the buffer holds {total}"
        )));
    }
    Ok(out)
}
