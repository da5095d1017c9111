//! Which NVML GPU a CUDA device is. NVML numbers the machine's GPUs in PCI bus order, all of them; CUDA
//! numbers only those `CUDA_VISIBLE_DEVICES` lets through, in its order, and without
//! `CUDA_DEVICE_ORDER=PCI_BUS_ID` enumerates the fastest first: `cuda:0` is NVML GPU 0 only by chance.
//! The CUDA device's own UUID and PCI bus id (read from the driver) name its NVML GPU whatever the order;
//! a MIG instance has a UUID of its own and its parent's bus id, so it maps to its parent GPU, whose busy %
//! and memory NVML reports. Where the driver cannot say, `CUDA_VISIBLE_DEVICES` is read as CUDA reads it.
//! Both are pure functions of what NVML lists, tested with faked machines.

/// One GPU as NVML lists it (index = its position in the list).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct NvmlGpu {
    /// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
    pub uuid: String,
    /// `00000000:3B:00.0`.
    pub pci_bus_id: String,
    pub name: String,
    /// The UUIDs (`MIG-…`) of its MIG instances, if any.
    pub mig_uuids: Vec<String>,
}

/// A CUDA device's own identity, read from the driver (either may be missing).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct CudaIds {
    pub uuid: Option<String>,
    pub pci_bus_id: Option<String>,
}

/// A UUID's hex digits, lower case, without its `GPU-`/`MIG-` prefix and dashes.
fn uuid_hex(s: &str) -> String {
    let s = s.trim();
    let body = ["GPU-", "MIG-", "gpu-", "mig-"].iter().find_map(|p| s.strip_prefix(p)).unwrap_or(s);
    body.chars().filter(char::is_ascii_hexdigit).map(|c| c.to_ascii_lowercase()).collect()
}

/// A PCI bus id as (domain, bus, device, function): NVML's `00000000:3B:00.0` and CUDA's `0000:3b:00.0`
/// are the same GPU.
pub(crate) fn pci_key(s: &str) -> Option<(u32, u32, u32, u32)> {
    let (domain, rest) = s.trim().split_once(':')?;
    let (bus, rest) = rest.split_once(':')?;
    let (device, function) = rest.split_once('.')?;
    let hex = |x: &str| u32::from_str_radix(x, 16).ok();
    Some((hex(domain)?, hex(bus)?, hex(device)?, hex(function)?))
}

/// `cuDeviceGetUuid`'s 16 bytes as NVML writes a GPU's UUID.
pub(crate) fn cuda_uuid_string(bytes: [u8; 16]) -> String {
    let h: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        h[0..4].concat(),
        h[4..6].concat(),
        h[6..8].concat(),
        h[8..10].concat(),
        h[10..].concat()
    )
}

/// The NVML index of the CUDA device whose own ids are `cuda`: by UUID (the GPU's or one of its MIG
/// instances'), else by PCI bus id.
pub(crate) fn match_by_ids(cuda: &CudaIds, nvml: &[NvmlGpu]) -> Option<usize> {
    let by_uuid =
        cuda.uuid.as_deref().map(uuid_hex).filter(|u| !u.is_empty()).and_then(|u| {
            nvml.iter().position(|g| uuid_hex(&g.uuid) == u || g.mig_uuids.iter().any(|m| uuid_hex(m) == u))
        });
    by_uuid.or_else(|| {
        let key = pci_key(cuda.pci_bus_id.as_deref()?)?;
        nvml.iter().position(|g| pci_key(&g.pci_bus_id) == Some(key))
    })
}

/// Why CUDA device `ordinal` cannot be matched to an NVML GPU by CUDA's order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum MatchError {
    #[error(
        "cannot tell which GPU {0} is: CUDA lists these different GPUs fastest first, an order NVML does not know; set CUDA_DEVICE_ORDER=PCI_BUS_ID"
    )]
    FastestFirst(String),
    #[error("there is no cuda:{ordinal}: NVML lists {count} GPUs")]
    NoDevice { ordinal: usize, count: usize },
    #[error("there is no cuda:{ordinal}: CUDA_VISIBLE_DEVICES={visible:?} lets {passed} of NVML's GPUs through")]
    NotVisible { ordinal: usize, visible: String, passed: usize },
}

/// The NVML index of CUDA device `ordinal` from `CUDA_VISIBLE_DEVICES` (`visible`; integers, `GPU-<uuid>`
/// or a unique prefix of one, `MIG-<uuid>`; CUDA stops reading the list at the first entry it cannot
/// use) and `CUDA_DEVICE_ORDER` (`order`). An integer counts in CUDA's enumeration order: PCI bus order
/// with `PCI_BUS_ID`; by default the fastest first, which is PCI bus order only where the GPUs are all the
/// same model; otherwise the error says to set `CUDA_DEVICE_ORDER=PCI_BUS_ID`.
pub(crate) fn match_by_order(
    ordinal: usize,
    visible: Option<&str>,
    order: Option<&str>,
    nvml: &[NvmlGpu],
) -> Result<usize, MatchError> {
    let mut pci_order: Vec<usize> = (0..nvml.len()).collect();
    pci_order.sort_by_key(|&i| pci_key(&nvml[i].pci_bus_id));
    let pci_bus_order = order.is_some_and(|o| o.trim() == "PCI_BUS_ID");
    let one_model = nvml.windows(2).all(|w| w[0].name == w[1].name);
    let enumerated = |what: &str| -> Result<&[usize], MatchError> {
        if pci_bus_order || one_model { Ok(&pci_order) } else { Err(MatchError::FastestFirst(what.to_string())) }
    };
    let Some(visible) = visible else {
        return enumerated(&format!("cuda:{ordinal}"))?
            .get(ordinal)
            .copied()
            .ok_or(MatchError::NoDevice { ordinal, count: nvml.len() });
    };
    let mut listed = Vec::new();
    for entry in visible.split(',').map(str::trim) {
        let found = if let Ok(i) = entry.parse::<usize>() {
            enumerated(&format!("CUDA_VISIBLE_DEVICES entry {entry}"))?.get(i).copied()
        } else if entry.len() > 4 && entry[..4].eq_ignore_ascii_case("MIG-") {
            let u = uuid_hex(entry);
            nvml.iter().position(|g| g.mig_uuids.iter().any(|m| uuid_hex(m) == u))
        } else if entry.len() > 4 && entry[..4].eq_ignore_ascii_case("GPU-") {
            let u = uuid_hex(entry);
            let hits: Vec<usize> = (0..nvml.len()).filter(|&i| uuid_hex(&nvml[i].uuid).starts_with(&u)).collect();
            (hits.len() == 1).then(|| hits[0])
        } else {
            None
        };
        match found {
            Some(i) if !listed.contains(&i) || entry.starts_with("MIG-") => listed.push(i),
            _ => break,
        }
    }
    listed.get(ordinal).copied().ok_or_else(|| MatchError::NotVisible {
        ordinal,
        visible: visible.to_string(),
        passed: listed.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A machine of four GPUs, NVML's order (PCI bus order); GPU 2 is split into two MIG instances.
    fn machine() -> Vec<NvmlGpu> {
        let gpu = |i: u8, bus: &str, name: &str| NvmlGpu {
            uuid: format!("GPU-ab{i}{i}aaaa-bbbb-cccc-dddd-eeeeeeeeeee{i}"),
            pci_bus_id: format!("00000000:{bus}:00.0"),
            name: name.into(),
            mig_uuids: Vec::new(),
        };
        let mut m = vec![gpu(0, "1B", "H100"), gpu(1, "3B", "H100"), gpu(2, "8A", "H100"), gpu(3, "CA", "H100")];
        m[2].mig_uuids =
            vec!["MIG-22220000-1111-2222-3333-444444444444".into(), "MIG-22220001-1111-2222-3333-444444444444".into()];
        m
    }

    #[test]
    fn a_cuda_device_is_its_nvml_gpu_by_uuid_or_bus_id_whatever_the_order() {
        let m = machine();
        // CUDA's view of GPU 3: its UUID from cuDeviceGetUuid, its bus id as cuDeviceGetPCIBusId writes it.
        let ids = CudaIds {
            uuid: Some(cuda_uuid_string([
                0xab, 0x33, 0xaa, 0xaa, 0xbb, 0xbb, 0xcc, 0xcc, 0xdd, 0xdd, 0xee, 0xee, 0xee, 0xee, 0xee, 0xe3,
            ])),
            pci_bus_id: Some("0000:ca:00.0".into()),
        };
        assert_eq!(ids.uuid.as_deref(), Some("GPU-ab33aaaa-bbbb-cccc-dddd-eeeeeeeeeee3"));
        assert_eq!(match_by_ids(&ids, &m), Some(3));
        // NVML's list in another order: the same GPU, at its new index.
        let mut reordered = m.clone();
        reordered.reverse();
        assert_eq!(match_by_ids(&ids, &reordered), Some(0));
        // By the bus id alone (no UUID), and a MIG instance to its parent by its UUID or its bus id.
        assert_eq!(match_by_ids(&CudaIds { uuid: None, pci_bus_id: Some("0000:3B:00.0".into()) }, &m), Some(1));
        let mig = CudaIds { uuid: Some("MIG-22220001-1111-2222-3333-444444444444".into()), pci_bus_id: None };
        assert_eq!(match_by_ids(&mig, &m), Some(2));
        let mig = CudaIds {
            uuid: Some("GPU-ffffffff-1111-2222-3333-444444444444".into()),
            pci_bus_id: Some("0000:8a:00.0".into()),
        };
        assert_eq!(match_by_ids(&mig, &m), Some(2));
        assert_eq!(
            match_by_ids(&CudaIds { uuid: Some("GPU-0".into()), pci_bus_id: Some("0000:ff:00.0".into()) }, &m),
            None
        );
        assert_eq!(match_by_ids(&CudaIds::default(), &m), None);
    }

    #[test]
    fn cuda_visible_devices_is_read_as_cuda_reads_it() {
        let m = machine();
        let at = |ordinal, visible| match_by_order(ordinal, visible, None, &m);
        assert_eq!(at(0, None), Ok(0));
        assert_eq!(at(3, None), Ok(3));
        assert_eq!((at(0, Some("2,0")), at(1, Some("2,0"))), (Ok(2), Ok(0)));
        assert_eq!(at(0, Some(" 3 ")), Ok(3));
        // UUIDs, whole or a unique prefix; a MIG instance counts as its parent.
        assert_eq!(at(0, Some("GPU-AB11AAAA-bbbb-cccc-dddd-eeeeeeeeeee1")), Ok(1));
        assert_eq!(at(1, Some("GPU-ab33,1")), Ok(1));
        assert_eq!(at(0, Some("MIG-22220001-1111-2222-3333-444444444444")), Ok(2));
        // CUDA stops at the first entry it cannot use: an ambiguous prefix, an unknown index, a name.
        assert!(at(0, Some("GPU-ab,1")).unwrap_err().to_string().contains("lets 0 of NVML's GPUs through"));
        assert_eq!(at(0, Some("1,7,2")), Ok(1));
        assert!(at(1, Some("1,7,2")).unwrap_err().to_string().contains("there is no cuda:1"));
        assert!(at(0, Some("")).is_err(), "an empty list hides every GPU");
        assert!(at(4, None).unwrap_err().to_string().contains("NVML lists 4 GPUs"));
    }

    #[test]
    fn the_fastest_first_order_is_known_only_for_one_model_or_by_pci_bus_order() {
        let mut m = machine();
        m[1].name = "RTX 4080".into();
        let err = match_by_order(0, None, None, &m).unwrap_err().to_string();
        assert!(err.contains("CUDA_DEVICE_ORDER=PCI_BUS_ID"), "{err}");
        assert!(match_by_order(0, Some("1"), Some("FASTEST_FIRST"), &m).is_err());
        assert_eq!(match_by_order(1, None, Some("PCI_BUS_ID"), &m), Ok(1));
        // UUIDs name the GPUs whatever CUDA's order.
        assert_eq!(match_by_order(0, Some("GPU-ab11"), None, &m), Ok(1));
        // PCI bus order is the bus ids', whatever order NVML's list came in.
        let mut shuffled = machine();
        shuffled.swap(0, 3);
        assert_eq!(match_by_order(0, Some("0"), Some("PCI_BUS_ID"), &shuffled), Ok(3));
        assert_eq!(pci_key("00000000:3B:00.0"), pci_key("0000:3b:00.0"));
        assert_eq!(pci_key("3b:00"), None);
    }
}
