package dev.hyspec.bench;

import dev.hyspec.backend.StateLayout;
import dev.hyspec.bench.StateUpdateBench.Result;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/** The printed table of {@link StateUpdateBench} and the derived replay speed-ups. */
final class StateUpdateTable {
    /** Replay against intermediate-copy at one (arch, layout, T, batch): {@code factor = icUs / replayUs}. */
    record Speedup(String arch, StateLayout layout, int tokens, int batch, double replayUs, double icUs) {
        double factor() {
            return icUs / replayUs;
        }
    }

    private StateUpdateTable() {}

    /** Every (arch, layout, T, batch) timed for both replay and intermediate-copy. */
    static List<Speedup> speedups(List<Result> results) {
        List<Speedup> out = new ArrayList<>();
        for (Result r : results) {
            if (!r.op().equals(StateWorkload.Op.REPLAY.label)) {
                continue;
            }
            for (Result c : results) {
                if (c.op().equals(StateWorkload.Op.INTERMEDIATE_COPY.label) && c.arch().equals(r.arch())
                        && c.layout() == r.layout() && c.tokens() == r.tokens() && c.batch() == r.batch()) {
                    out.add(new Speedup(r.arch(), r.layout(), r.tokens(), r.batch(), r.medianUs(), c.medianUs()));
                }
            }
        }
        return out;
    }

    static void print(PrintStream out, List<Result> results, List<StateUpdateCheck.Result> checks, double bandwidth) {
        List<Speedup> speedups = speedups(results);
        out.printf(Locale.ROOT, "%nRecurrent-state update per call (median device time); floor = bytes moved at the "
                + "measured copy bandwidth %.0f GB/s%n", bandwidth / 1e9);
        out.printf(Locale.ROOT, "%-6s %-17s %-6s %2s %5s %11s %11s %7s %8s %10s  %s%n", "arch", "op", "layout", "T",
                "batch", "median us", "floor us", "ratio", "GB/s", "replay/IC", "note");
        for (Result r : results) {
            String speedup = "";
            for (Speedup s : speedups) {
                if (r.op().equals(StateWorkload.Op.REPLAY.label) && s.arch().equals(r.arch()) && s.layout() == r.layout()
                        && s.tokens() == r.tokens() && s.batch() == r.batch()) {
                    speedup = String.format(Locale.ROOT, "%.2fx", s.factor());
                }
            }
            List<String> notes = new ArrayList<>();
            if (r.hostBound()) {
                notes.add("host-bound");
            }
            for (StateUpdateCheck.Result k : checks) {
                if (!k.passed() && k.arch().equals(r.arch()) && k.op().equals(r.op()) && k.layout() == r.layout()) {
                    notes.add("CHECK FAILED");
                }
            }
            if (!Double.isNaN(r.copyUs())) {
                notes.add(String.format(Locale.ROOT, "same-bytes copy %.1f us = %.2fx floor", r.copyUs(), r.copyRatio()));
            }
            out.printf(Locale.ROOT, "%-6s %-17s %-6s %2d %5d %11.1f %11.1f %7.2f %8.0f %10s  %s%n", r.arch(), r.op(),
                    r.layout(), r.tokens(), r.batch(), r.medianUs(), r.floorUs(), r.ratio(), r.achievedGBs(), speedup,
                    String.join(", ", notes));
        }
        out.println();
    }
}
