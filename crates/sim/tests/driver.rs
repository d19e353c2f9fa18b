//! What the result fields mean, checked on runs where the easy reading would be wrong.

use sim::driver::{run, SimConfig};

/// Requests smaller than a block: each is one user block write (the FMS rewrites the
/// block), while throughput counts the host's bytes, not whole blocks.
#[test]
fn throughput_counts_host_bytes_when_requests_are_smaller_than_blocks() {
    for unit in [512u32, 4096, 16384] {
        let mut cfg = SimConfig::flagship();
        cfg.written_bytes = 2 << 20;
        cfg.unit_bytes = unit;
        let r = run(&cfg).unwrap();
        let requests = cfg.written_bytes / unit as u64;
        let blocks_per_request = (unit as u64).div_ceil(cfg.fms.block_size as u64);
        assert_eq!(r.user_writes, requests * blocks_per_request, "unit {unit}");
        let host = r.throughput_bytes_per_s * r.device_time_s;
        assert!(
            (host - cfg.written_bytes as f64).abs() < 1e-6 * cfg.written_bytes as f64,
            "unit {unit}: throughput × device time = {host}, written {}",
            cfg.written_bytes
        );
    }
}

/// Arrivals past the picosecond clock's range are an error, not a saturated clock that
/// gives later requests zero latency.
#[test]
fn arrivals_past_the_clock_range_are_errors() {
    use sim::driver::Arrival;
    let mut cfg = SimConfig::flagship();
    cfg.written_bytes = 64 << 10;
    cfg.arrival = Arrival::Poisson { rate: 1e-8 };
    let e = run(&cfg).unwrap_err().to_string();
    assert!(e.contains("past the simulator's clock range"), "{e}");
    // A rate the clock can hold runs.
    cfg.arrival = Arrival::Poisson { rate: 1.0 };
    assert!(run(&cfg).is_ok());
}
