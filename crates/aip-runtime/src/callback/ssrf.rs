//! The address policy of outbound calls to targets a request names (spec 17.4): callback targets
//! and push-notification URLs. A target is checked on the address it resolves to, never on its
//! spelling: loopback, private, link-local, unique-local, CGNAT, unspecified, multicast,
//! broadcast, documentation, benchmark, reserved and metadata-service addresses are denied
//! (IPv4, IPv6 and IPv4-mapped / NAT64 / 6to4 forms), unless deployment policy allows the
//! exact host. Numeric hosts are read the way resolvers read them (`2130706433`, `0x7f.1`,
//! `0177.0.0.1`), so a spelling cannot smuggle a denied address past the check. The caller must
//! connect to the address that was checked (no second resolution), so DNS rebinding cannot switch
//! it.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Why a target address is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AddressDenied {
    /// The host is not on the deployment's allowlist.
    #[error("host {0} is not allowed")]
    HostNotAllowed(String),
    /// The host resolved to (or is) an address of a denied class.
    #[error("{host} resolves to {address}, a {class} address")]
    DeniedAddress {
        /// The host as named.
        host: String,
        /// The address it resolved to.
        address: IpAddr,
        /// The denied class.
        class: &'static str,
    },
    /// The host did not resolve, or to no address at all.
    #[error("host {0} does not resolve")]
    Unresolvable(String),
    /// The host is not a DNS name or an IP literal.
    #[error("host {0:?} is not a valid host name")]
    InvalidHost(String),
}

/// What deployment policy allows (spec 17.4): an exact host allowlist (empty: any public host) and
/// the hosts explicitly owned and allowed to resolve to otherwise denied addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    /// Exact host names (lowercase, no trailing dot) targets may name; empty: any host.
    pub allowed_hosts: BTreeSet<String>,
    /// Hosts allowed to resolve to private, loopback or other denied addresses (owned by the
    /// deployment).
    pub allow_internal: BTreeSet<String>,
}

impl AddressPolicy {
    /// Resolves `host` and returns the addresses a call may connect to (port `port`), every one
    /// checked: a host that resolves to any denied address is refused as a whole (a mixed answer
    /// is how rebinding attacks start).
    pub async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, AddressDenied> {
        let host = normalize(host)?;
        if !self.allowed_hosts.is_empty() && !self.allowed_hosts.contains(&host) {
            return Err(AddressDenied::HostNotAllowed(host));
        }
        let addresses: Vec<IpAddr> = match numeric_host(&host) {
            Some(ip) => vec![ip],
            None => tokio::net::lookup_host((host.as_str(), port))
                .await
                .map_err(|_| AddressDenied::Unresolvable(host.clone()))?
                .map(|a| a.ip())
                .collect(),
        };
        if addresses.is_empty() {
            return Err(AddressDenied::Unresolvable(host));
        }
        for address in &addresses {
            self.check(&host, *address)?;
        }
        Ok(addresses
            .into_iter()
            .map(|ip| SocketAddr::new(ip, port))
            .collect())
    }

    /// Whether `host` may be called at `address`.
    pub fn check(&self, host: &str, address: IpAddr) -> Result<(), AddressDenied> {
        match denied_class(address) {
            Some(class) if !self.allow_internal.contains(host) => {
                Err(AddressDenied::DeniedAddress {
                    host: host.to_owned(),
                    address,
                    class,
                })
            }
            _ => Ok(()),
        }
    }
}

/// The lowercase host without a trailing dot or IPv6 brackets; refuses what is not a host.
fn normalize(host: &str) -> Result<String, AddressDenied> {
    let trimmed = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase();
    let valid = !trimmed.is_empty()
        && trimmed.len() <= 253
        && trimmed
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '_'));
    if valid {
        Ok(trimmed)
    } else {
        Err(AddressDenied::InvalidHost(host.to_owned()))
    }
}

/// An IP literal, including the IPv4 spellings resolvers accept: one to four dot-separated parts,
/// each decimal, octal (leading `0`) or hex (`0x`), the last part filling the remaining bytes.
pub fn numeric_host(host: &str) -> Option<IpAddr> {
    if let Ok(v6) = host.parse::<Ipv6Addr>() {
        return Some(IpAddr::V6(v6));
    }
    let parts: Vec<&str> = host.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut values = Vec::with_capacity(parts.len());
    for part in &parts {
        values.push(parse_part(part)?);
    }
    let (last, leading) = values.split_last()?;
    let mut address: u32 = 0;
    for (i, value) in leading.iter().enumerate() {
        if *value > 0xff {
            return None;
        }
        address |= (*value as u32) << (24 - 8 * i);
    }
    let room = 32 - 8 * leading.len();
    if room < 32 && *last >> room != 0 {
        return None;
    }
    address |= u32::try_from(*last).ok()?;
    Some(IpAddr::V4(Ipv4Addr::from(address)))
}

fn parse_part(part: &str) -> Option<u64> {
    if part.is_empty() {
        return None;
    }
    let (digits, radix) =
        if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
            (hex, 16)
        } else if part.len() > 1 && part.starts_with('0') {
            (&part[1..], 8)
        } else {
            (part, 10)
        };
    if digits.is_empty() {
        // `0x` alone is zero, as resolvers read it.
        return (radix == 16).then_some(0);
    }
    let value = u64::from_str_radix(digits, radix).ok()?;
    (value <= u64::from(u32::MAX)).then_some(value)
}

/// The denied class of `address`, or `None` for a public unicast address.
pub fn denied_class(address: IpAddr) -> Option<&'static str> {
    match address {
        IpAddr::V4(v4) => denied_v4(v4),
        IpAddr::V6(v6) => denied_v6(v6),
    }
}

fn denied_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        (0, ..) => "unspecified (this network)",
        (10, ..) => "private",
        (100, 64..=127, _) => "shared (CGNAT)",
        (127, ..) => "loopback",
        (169, 254, _) => "link-local (metadata service)",
        (172, 16..=31, _) => "private",
        (192, 0, 0) => "IETF protocol assignment",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "documentation",
        (192, 88, 99) => "6to4 relay anycast",
        (192, 168, _) => "private",
        (198, 18..=19, _) => "benchmarking",
        (224..=239, ..) => "multicast",
        (240..=255, ..) => "reserved or broadcast",
        _ => return None,
    })
}

fn denied_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return denied_v4(v4);
    }
    let segments = ip.segments();
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    Some(match segments[0] {
        // IPv4-compatible (deprecated) ::a.b.c.d, and the NAT64 prefixes, carry an IPv4 address.
        0 if segments[1..6].iter().all(|s| *s == 0) => {
            let v4 = Ipv4Addr::new(
                (segments[6] >> 8) as u8,
                segments[6] as u8,
                (segments[7] >> 8) as u8,
                segments[7] as u8,
            );
            return denied_v4(v4).or(Some("IPv4-compatible"));
        }
        0x64 if segments[1] == 0xff9b => {
            let v4 = Ipv4Addr::new(
                (segments[6] >> 8) as u8,
                segments[6] as u8,
                (segments[7] >> 8) as u8,
                segments[7] as u8,
            );
            return denied_v4(v4);
        }
        // 6to4 embeds the IPv4 address in the second and third segments.
        0x2002 => {
            let v4 = Ipv4Addr::new(
                (segments[1] >> 8) as u8,
                segments[1] as u8,
                (segments[2] >> 8) as u8,
                segments[2] as u8,
            );
            return denied_v4(v4);
        }
        0x2001 if segments[1] == 0x0db8 => "documentation",
        0x2001 if segments[1] < 0x0200 => "IETF protocol assignment (Teredo, ORCHID, ...)",
        s if s & 0xfe00 == 0xfc00 => "unique-local",
        s if s & 0xffc0 == 0xfe80 => "link-local",
        s if s & 0xffc0 == 0xfec0 => "site-local (deprecated)",
        s if s & 0xff00 == 0xff00 => "multicast",
        0x0100 if segments[1..4].iter().all(|s| *s == 0) => "discard-only",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn every_denied_class_is_denied_and_public_addresses_are_not() {
        for denied in [
            "0.0.0.0",
            "10.1.2.3",
            "100.64.0.1",
            "100.127.255.255",
            "127.0.0.1",
            "127.9.9.9",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "2001:db8::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "100::1",
            "2001::1",
        ] {
            assert!(denied_class(v(denied)).is_some(), "{denied} must be denied");
        }
        for public in [
            "1.1.1.1",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.0.1",
            "172.32.0.1",
            "192.169.0.1",
            "2606:4700:4700::1111",
            "2a00:1450:4001::200e",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::",
        ] {
            assert_eq!(denied_class(v(public)), None, "{public} is public");
        }
    }

    #[test]
    fn numeric_spellings_are_read_the_way_resolvers_read_them() {
        let loopback = Some(v("127.0.0.1"));
        for spelling in [
            "127.0.0.1",
            "2130706433",
            "0x7f000001",
            "0x7f.1",
            "127.1",
            "0177.0.0.1",
            "0177.1",
            "0x7f.0.0.1",
            "127.0.1",
        ] {
            assert_eq!(numeric_host(spelling), loopback, "{spelling}");
        }
        assert_eq!(
            numeric_host("0251.0376.0251.0376"),
            Some(v("169.254.169.254"))
        );
        assert_eq!(numeric_host("::1"), Some(v("::1")));
        for not_numeric in [
            "example.com",
            "1.2.3.4.5",
            "256.1.1.1",
            "1.2.3.256",
            "08.1.1.1",
            "",
        ] {
            assert_eq!(numeric_host(not_numeric), None, "{not_numeric}");
        }
    }

    #[tokio::test]
    async fn resolution_checks_every_address_and_honours_the_allowlists() {
        let open = AddressPolicy::default();
        for target in [
            "127.0.0.1",
            "2130706433",
            "[::1]",
            "0x7f.1",
            "localhost",
            "LOCALHOST.",
        ] {
            let denied = open.resolve(target, 443).await;
            assert!(
                matches!(denied, Err(AddressDenied::DeniedAddress { .. })),
                "{target}: {denied:?}"
            );
        }
        assert_eq!(
            open.resolve("8.8.8.8", 443).await.unwrap(),
            vec![SocketAddr::new(v("8.8.8.8"), 443)]
        );
        assert!(matches!(
            open.resolve("bad host/x", 443).await,
            Err(AddressDenied::InvalidHost(_))
        ));
        let strict = AddressPolicy {
            allowed_hosts: BTreeSet::from(["hooks.example.com".to_owned(), "localhost".to_owned()]),
            allow_internal: BTreeSet::from(["localhost".to_owned()]),
        };
        assert!(matches!(
            strict.resolve("8.8.8.8", 443).await,
            Err(AddressDenied::HostNotAllowed(_))
        ));
        // Explicitly owned and allowed: loopback is then reachable, on the checked address only.
        let allowed = strict.resolve("localhost", 8080).await.unwrap();
        assert!(
            !allowed.is_empty()
                && allowed
                    .iter()
                    .all(|a| a.port() == 8080 && a.ip().is_loopback())
        );
    }
}
