//! The one deadline formula (`Action::deadline_s`) that dispatch sets, `check` warns with and
//! the prompts state.

#[test]
fn the_deadline_is_expect_times_factor_plus_floor_plus_a_poll_or_a_silence_window_for_push() {
    // The shared lamp (tests/plants/lamp.toml) with a slower poll, a window, and a budget.
    let src = include_str!("../../../tests/plants/lamp.toml")
        .replace(
            "poll_ms = 20",
            "poll_ms = 50\nliveness = { max_silence_s = 4.0 }",
        )
        .replace(
            "expect_s = 0.02",
            "expect_s = 0.5\ntimeout_factor = 2\ntimeout_floor_ms = 250",
        );
    let plant = closedloop_plant::parse(&src, "p.toml", std::path::Path::new("/srv")).unwrap();
    let device = &plant.devices[0];
    let action = &device.actions[0];
    // 0.5 × 2 + 0.25 + 0.05
    assert!((action.deadline_s(device, 0.5, false) - 1.3).abs() < 1e-9);
    // A device that reports when it likes: at least 0.5 + 4 + 0.25.
    assert!((action.deadline_s(device, 0.5, true) - 4.75).abs() < 1e-9);
    // A long move keeps its own budget even on a push device.
    assert!((action.deadline_s(device, 10.0, true) - 20.3).abs() < 1e-9);
}
