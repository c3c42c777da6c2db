#!/usr/bin/python3
"""mido as the oracle for relgrad's Standard MIDI File reader and writer (train/music/midi.h).

Run with Debian's Python, which has python3-mido (apt-get install python3-mido):

    /usr/bin/python3 tools/check_midi_with_mido.py fixtures   # mido writes tests/golden/midi_mido_*.mid + .txt
    /usr/bin/python3 tools/check_midi_with_mido.py relgrad    # mido reads tests/golden/midi_relgrad_*.mid → .txt

`fixtures` makes files with mido's own writer (format 0 and 1; mido writes running status) and one
assembled byte by byte (running status across a meta event's neighbours, velocity-0 note-offs),
and writes what mido sees in each. `relgrad` reads the files relgrad wrote (regenerate them with
RELGRAD_UPDATE_GOLDEN=1 build/tests/relgrad_tests -tc="midi golden*") and writes what mido sees.
tests/test_midi.cpp compares relgrad's parse with these .txt files and relgrad's output with the
.mid files byte for byte. The tests never run Python; this script runs once and its output is committed.

The .txt format, one record per line:
    file <format> <ticks_per_beat> <ntracks>
    msg <track> <absolute tick> <hex of mido's msg.bytes()>   every message, End of Track included
    tempo <absolute tick> <microseconds per beat>             set_tempo, in mido's merged order
    note <pitch> <velocity> <channel> <start s> <end s>       note_on/off pairs on mido's merged
                                                              playback (times from mido), sorted
    length <seconds>                                          mido.MidiFile.length
"""
import glob
import os
import sys

import mido

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'golden')


def describe(path):
    mid = mido.MidiFile(path)
    lines = ['file %d %d %d' % (mid.type, mid.ticks_per_beat, len(mid.tracks))]
    for index, track in enumerate(mid.tracks):
        tick = 0
        for msg in track:
            tick += msg.time
            lines.append('msg %d %d %s' % (index, tick, bytes(msg.bytes()).hex()))
    tick = 0
    for msg in mido.merge_tracks(mid.tracks):
        tick += msg.time
        if msg.type == 'set_tempo':
            lines.append('tempo %d %d' % (tick, msg.tempo))
    now, sounding, notes = 0.0, {}, []
    for msg in mid:  # merged, with times in seconds under the tempo map
        now += msg.time
        if msg.type == 'note_on' and msg.velocity > 0:
            sounding[(msg.channel, msg.note)] = (now, msg.velocity)
        elif msg.type in ('note_on', 'note_off') and (msg.channel, msg.note) in sounding:
            start, velocity = sounding.pop((msg.channel, msg.note))
            notes.append((start, msg.note, msg.channel, velocity, now))
    for start, pitch, channel, velocity, end in sorted(notes):
        lines.append('note %d %d %d %.9f %.9f' % (pitch, velocity, channel, start, end))
    lines.append('length %.9f' % mid.length)
    with open(path[:-4] + '.txt', 'w') as out:
        out.write('\n'.join(lines) + '\n')
    print('%s: %d tracks, %d notes' % (os.path.basename(path), len(mid.tracks), len(notes)))


def with_deltas(events):
    """(absolute tick, message) pairs → a MidiTrack with delta times."""
    track, last = mido.MidiTrack(), 0
    for tick, msg in sorted(events, key=lambda e: e[0]):
        track.append(msg.copy(time=tick - last))
        last = tick
    return track


def fixture_format0():
    mid = mido.MidiFile(type=0, ticks_per_beat=480)
    M, m = mido.MetaMessage, mido.Message
    events = [(0, M('track_name', name='relgrad fixture')), (0, M('set_tempo', tempo=500000)),
              (0, M('time_signature', numerator=3, denominator=4)), (0, M('key_signature', key='G')),
              (0, m('program_change', channel=0, program=5)), (0, m('control_change', channel=0, control=7, value=100)),
              (0, m('sysex', data=[0x7E, 0x7F, 0x09, 0x01]))]
    tick = 0
    for i, pitch in enumerate([60, 62, 64, 65, 67, 69, 71, 72]):  # note_on velocity 0 as note-off: running status
        events.append((tick, m('note_on', channel=0, note=pitch, velocity=40 + 10 * i)))
        events.append((tick + 400, m('note_on', channel=0, note=pitch, velocity=0)))
        tick += 480
    events.append((tick, M('set_tempo', tempo=400000)))
    events.append((tick, M('text', text='faster')))
    events.append((tick, m('pitchwheel', channel=0, pitch=-2000)))
    for pitch in (48, 52, 55):  # a chord with explicit note_off messages
        events.append((tick, m('note_on', channel=0, note=pitch, velocity=90)))
        events.append((tick + 960, m('note_off', channel=0, note=pitch, velocity=64)))
    events.append((tick + 100, m('aftertouch', channel=0, value=30)))
    events.append((tick + 200, m('polytouch', channel=0, note=48, value=20)))
    track = with_deltas(events)
    track.append(M('end_of_track', time=240))
    mid.tracks.append(track)
    mid.save(os.path.join(GOLDEN, 'midi_mido_format0.mid'))


def fixture_format1():
    mid = mido.MidiFile(type=1, ticks_per_beat=96)
    M, m = mido.MetaMessage, mido.Message
    mid.tracks.append(with_deltas([(0, M('set_tempo', tempo=600000)), (0, M('time_signature', numerator=4, denominator=4)),
                                   (384, M('set_tempo', tempo=300000)), (384, M('marker', text='double time')),
                                   (768, M('set_tempo', tempo=1000000))]))
    melody = []
    for i, pitch in enumerate([67, 69, 71, 72, 74, 72, 71, 69, 67, 64, 62, 60]):
        melody += [(96 * i, m('note_on', channel=0, note=pitch, velocity=100)), (96 * i + 90, m('note_off', channel=0, note=pitch))]
    mid.tracks.append(with_deltas([(0, M('track_name', name='melody'))] + melody))
    chords = [(0, m('program_change', channel=1, program=48))]
    for bar, root in enumerate([48, 53, 55, 48]):
        for k, pitch in enumerate((root, root + 4, root + 7)):
            chords += [(288 * bar, m('note_on', channel=1, note=pitch, velocity=70 + k)),
                       (288 * bar + 287, m('note_on', channel=1, note=pitch, velocity=0))]
        chords += [(288 * bar + 48, m('note_on', channel=9, note=36, velocity=110)),
                   (288 * bar + 60, m('note_off', channel=9, note=36))]
    mid.tracks.append(with_deltas(chords))
    mid.save(os.path.join(GOLDEN, 'midi_mido_format1.mid'))


def fixture_running_status():
    """Assembled by hand: running status over note-ons, velocity-0 offs and a controller."""
    body = bytes([0x00, 0xFF, 0x51, 0x03, 0x07, 0xA1, 0x20,       # tempo 500000
                  0x00, 0x90, 60, 100, 0x00, 64, 90, 0x00, 67, 80,  # C-E-G on, running status
                  0x83, 0x60, 60, 0, 0x00, 64, 0, 0x00, 67, 0,      # 480 ticks later: velocity-0 offs
                  0x00, 0xB0, 64, 127, 0x10, 64, 0,                 # pedal down, up: running status on B0
                  0x00, 0xFF, 0x01, 0x02, ord('h'), ord('i'),       # meta: cancels running status
                  0x00, 0x90, 72, 1, 0x81, 0x70, 72, 0,             # so the status is written again
                  0x00, 0xFF, 0x2F, 0x00])
    data = b'MThd' + (6).to_bytes(4, 'big') + bytes([0, 0, 0, 1, 0x01, 0xE0])
    data += b'MTrk' + len(body).to_bytes(4, 'big') + body
    with open(os.path.join(GOLDEN, 'midi_mido_running.mid'), 'wb') as out:
        out.write(data)


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else 'relgrad'
    if what == 'fixtures':
        fixture_format0()
        fixture_format1()
        fixture_running_status()
        paths = sorted(glob.glob(os.path.join(GOLDEN, 'midi_mido_*.mid')))
    elif what == 'relgrad':
        paths = sorted(glob.glob(os.path.join(GOLDEN, 'midi_relgrad_*.mid')))
    else:
        sys.exit('usage: check_midi_with_mido.py fixtures|relgrad')
    if not paths:
        sys.exit('no files to describe')
    for path in paths:
        describe(path)


if __name__ == '__main__':
    main()
