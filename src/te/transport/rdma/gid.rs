//! GID selection (spec transfer-engine.md §5.5): `MC_GID_INDEX` when set, else the
//! best-ranked entry of the port's table, as upstream ranks them: RoCE v2 (or IB on an
//! InfiniBand port) only; with a network device and routable first, then routable
//! without one, then private IPv4 (10/8, 172.16/12, 100.64/10) with and without a
//! device around the degraded ones (overlay interfaces, link-local IPv6); lowest
//! index on ties; any non-zero GID as the last resort.

use crate::sys::verbs::{GidEntry, GidKind};

/// Names of overlay network devices, whose GIDs rarely reach other hosts.
const OVERLAY_PREFIXES: [&str; 6] = ["docker", "cni", "flannel", "calico", "vxlan", "tunl0"];

/// The chosen GID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chosen {
    /// Its index in the table.
    pub index: u32,
    /// Its bytes.
    pub gid: [u8; 16],
}

/// The rank of an entry (lower is better); `None` when it is not a candidate.
fn rank(e: &GidEntry, ethernet: bool) -> Option<u8> {
    let roce_v2 = e.kind == GidKind::RoceV2;
    let ib = e.kind == GidKind::IbRoceV1 && !ethernet;
    // Without type information (no sysfs), treat the entry as RoCE v2 on Ethernet.
    let unknown = e.kind == GidKind::Unknown;
    if !(roce_v2 || ib || unknown) || e.gid.iter().all(|&b| b == 0) {
        return None;
    }
    let v2 = roce_v2 || (unknown && ethernet);
    let mapped = e.gid[..10].iter().all(|&b| b == 0) && e.gid[10] == 0xff && e.gid[11] == 0xff;
    let overlay_iface = v2
        && e.netdev
            .as_deref()
            .is_some_and(|n| OVERLAY_PREFIXES.iter().any(|p| n.starts_with(p)));
    let private_v4 = v2 && !overlay_iface && mapped && private_ipv4(&e.gid[12..]);
    let link_local = v2 && !mapped && e.gid[0] == 0xfe && (e.gid[1] & 0xc0) == 0x80;
    let degraded = overlay_iface || link_local;
    Some(match (e.netdev.is_some(), degraded, private_v4) {
        (true, true, _) => 3,
        (true, false, true) => 2,
        (true, false, false) => 0,
        (false, true, _) => 5,
        (false, false, true) => 4,
        (false, false, false) => 1,
    })
}

/// 10/8, 172.16/12 and 100.64/10 (192.168/16 counts as routable, as upstream).
fn private_ipv4(a: &[u8]) -> bool {
    a[0] == 10 || (a[0] == 172 && (a[1] & 0xf0) == 16) || (a[0] == 100 && (a[1] & 0xc0) == 64)
}

/// Every candidate, best first; the first non-zero non-candidate last.
pub fn ranked(entries: &[GidEntry], ethernet: bool) -> Vec<Chosen> {
    let mut ranked: Vec<(u8, &GidEntry)> = entries
        .iter()
        .filter_map(|e| rank(e, ethernet).map(|r| (r, e)))
        .collect();
    ranked.sort_by_key(|(r, e)| (*r, e.index));
    let mut out: Vec<Chosen> = ranked
        .into_iter()
        .map(|(_, e)| Chosen {
            index: e.index,
            gid: e.gid,
        })
        .collect();
    if let Some(e) = entries
        .iter()
        .find(|e| e.gid.iter().any(|&b| b != 0) && rank(e, ethernet).is_none())
    {
        out.push(Chosen {
            index: e.index,
            gid: e.gid,
        });
    }
    out
}

/// `fixed` (from `MC_GID_INDEX`) when that entry exists, else the best-ranked one.
pub fn choose(entries: &[GidEntry], ethernet: bool, fixed: Option<u8>) -> Option<Chosen> {
    if let Some(i) = fixed {
        return entries
            .iter()
            .find(|e| e.index == u32::from(i))
            .map(|e| Chosen {
                index: e.index,
                gid: e.gid,
            });
    }
    ranked(entries, ethernet).into_iter().next()
}

/// Upstream's GID text: 16 lowercase two-digit hex bytes joined by `:`.
pub fn to_text(gid: &[u8; 16]) -> String {
    gid.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Parses [`to_text`]'s format (also accepts the 8-group form); `None` when invalid.
pub fn from_text(text: &str) -> Option<[u8; 16]> {
    crate::sys::verbs::parse_gid(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u32, gid: [u8; 16], kind: GidKind, netdev: Option<&str>) -> GidEntry {
        GidEntry {
            index,
            gid,
            kind,
            netdev: netdev.map(str::to_string),
        }
    }

    fn v4(a: [u8; 4]) -> [u8; 16] {
        let mut g = [0u8; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&a);
        g
    }

    fn link_local() -> [u8; 16] {
        let mut g = [0u8; 16];
        g[0] = 0xfe;
        g[1] = 0x80;
        g[15] = 1;
        g
    }

    #[test]
    fn routable_roce_v2_with_a_device_wins() {
        let table = [
            entry(0, link_local(), GidKind::IbRoceV1, Some("eth0")),
            entry(1, link_local(), GidKind::RoceV2, Some("eth0")),
            entry(2, v4([10, 0, 0, 5]), GidKind::IbRoceV1, Some("eth0")),
            entry(3, v4([10, 0, 0, 5]), GidKind::RoceV2, Some("eth0")),
            entry(4, v4([172, 17, 0, 2]), GidKind::RoceV2, Some("docker0")),
            entry(5, v4([203, 0, 113, 7]), GidKind::RoceV2, Some("eth1")),
        ];
        let order: Vec<u32> = ranked(&table, true).iter().map(|c| c.index).collect();
        // routable(5), private(3), degraded(1: link-local, 4: overlay), fallback(0).
        assert_eq!(order, [5, 3, 1, 4, 0]);
        assert_eq!(choose(&table, true, Some(2)).unwrap().index, 2);
        assert_eq!(choose(&table, true, Some(9)), None);
        // SoftRoCE on lo: ::ffff:127.0.0.1 RoCE v2 is chosen over the v1 entry.
        let rxe = [
            entry(0, link_local(), GidKind::IbRoceV1, Some("lo")),
            entry(1, v4([127, 0, 0, 1]), GidKind::RoceV2, Some("lo")),
        ];
        assert_eq!(choose(&rxe, true, None).unwrap().index, 1);
    }

    #[test]
    fn text_form() {
        let g = v4([127, 0, 0, 1]);
        let t = to_text(&g);
        assert_eq!(t, "00:00:00:00:00:00:00:00:00:00:ff:ff:7f:00:00:01");
        assert_eq!(from_text(&t), Some(g));
        assert_eq!(
            from_text("0000:0000:0000:0000:0000:ffff:7f00:0001"),
            Some(g)
        );
        assert_eq!(from_text("zz"), None);
        assert_eq!(from_text(""), None);
    }
}
