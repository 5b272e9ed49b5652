"""Settings: defaults, precedence (flag > env > file > default), validation."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from roost import config, config_sources

ROOT = Path(__file__).resolve().parents[2]


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    config_sources.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_defaults() -> None:
    cfg = config_sources.load(parse(), environ={})
    assert (cfg.bind, cfg.amqp_port, cfg.data_dir) == ("127.0.0.1,::1", 5672, "./data")
    assert cfg.bind_addresses == ["127.0.0.1", "::1"]  # both loopbacks


def test_bind_takes_several_addresses(tmp_path: Path) -> None:
    """Comma-separated, the flag repeated, a TOML string or list, or ROOST_BIND."""
    flags = parse("--bind", "::1, 127.0.0.1", "--bind", "[::1]", "--bind", "10.0.0.5")
    assert config_sources.load(flags, environ={}).bind_addresses == ["::1", "127.0.0.1", "10.0.0.5"]
    env = {"ROOST_BIND": "0.0.0.0,::"}
    assert config_sources.load(parse(), environ=env).bind_addresses == ["0.0.0.0", "::"]
    file = tmp_path / "r.toml"
    file.write_text('bind = ["127.0.0.1", "::1"]\n')
    assert config_sources.load(parse("--config", str(file)), environ={}).bind == "127.0.0.1,::1"
    with pytest.raises(ValueError, match="bind"):
        config_sources.load(parse("--bind", " , "), environ={})


def test_limit_defaults_are_rabbitmqs() -> None:
    """channel_max 2047, frame_max 128 KiB and max_message_size 128 MiB, as RabbitMQ 3.10."""
    cfg = config_sources.load(parse(), environ={})
    assert cfg.max_message_size == 128 * 1024 * 1024 == 134_217_728
    assert (cfg.channel_max, cfg.frame_max) == (2047, 131072)


def test_precedence(tmp_path: Path) -> None:
    file = tmp_path / "r.toml"
    file.write_text('amqp_port = 1111\nheartbeat = 5\nlog_level = "debug"\n')
    env = {"ROOST_AMQP_PORT": "2222", "ROOST_HEARTBEAT": "6"}
    cfg = config_sources.load(parse("--config", str(file), "--amqp-port", "3333"), environ=env)
    assert cfg.amqp_port == 3333  # flag
    assert cfg.heartbeat == 6  # env over file
    assert cfg.log_level == "debug"  # file over default


def test_sample_file_is_the_defaults() -> None:
    sample = ROOT / "roost.sample.toml"
    assert config_sources.load(parse("--config", str(sample)), environ={}) == config.Config()


def test_unknown_key_and_bad_values(tmp_path: Path) -> None:
    file = tmp_path / "r.toml"
    file.write_text("amqp_prot = 1\n")
    with pytest.raises(ValueError, match="amqp_prot"):
        config_sources.load(parse("--config", str(file)), environ={})
    with pytest.raises(ValueError, match="frame_max"):
        config_sources.load(parse("--frame-max", "100"), environ={})


def test_every_setting_has_a_flag_and_help() -> None:
    helptext = argparse.ArgumentParser()
    config_sources.add_arguments(helptext)
    text = helptext.format_help()
    for name in config_sources.FIELDS:
        assert config_sources.flag(name) in text
        assert config_sources.env_name(name) in text


def test_events_stream_settings() -> None:
    assert config_sources.load(parse(), environ={}).events_stream is None  # off by default
    cfg = config_sources.load(parse(), environ={"ROOST_EVENTS_STREAM": "roost.events"})
    assert cfg.events_stream == "roost.events"
    with pytest.raises(ValueError, match="events_stream"):
        config_sources.load(parse("--events-stream", "amq.events"), environ={})
    with pytest.raises(ValueError, match="events_max_bytes"):
        config_sources.load(parse("--events-max-bytes", "1000"), environ={})
