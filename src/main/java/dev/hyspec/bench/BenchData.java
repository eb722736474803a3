package dev.hyspec.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.MissingNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The two benchmark files as {@link BenchReport} reads them: {@code state-update.json} of
 * {@link StateUpdateBench} and {@code decode.json} of the end-to-end decode benchmark. Reading is
 * lenient: a missing file or field leaves that part empty (NaN for numbers), so a report can be
 * written from whatever was measured.
 */
record BenchData(Machine machine, String date, boolean quick, double copyBandwidthGBs, List<StateRow> state,
                 List<Check> checks, List<DecodeRow> decode, List<String> problems) {

    /** {@code drafter}: where the decode benchmark's drafts came from ("ngram", "oracle"; empty if unknown). */
    record Machine(String gpu, String driver, String drafter) {}

    /** One state-update figure. */
    record StateRow(String arch, String op, String layout, int tokens, int batch, double medianUs, double floorUs,
                    double ratio, double achievedGBs, boolean hostBound, boolean checkPassed, double copyUs) {}

    /** One correctness spot check of the state-update benchmark. */
    record Check(String arch, String op, String layout, double relativeError, boolean passed) {}

    /** One end-to-end decode figure. */
    record DecodeRow(String model, int batch, String mode, int k, double tokensPerSecond, double stepMs,
                     double acceptanceRate, double floorMs, double ratio) {}

    static BenchData read(Path stateFile, Path decodeFile) {
        List<String> problems = new ArrayList<>();
        JsonNode state = parse(stateFile, "state-update", problems);
        JsonNode decode = parse(decodeFile, "decode", problems);
        JsonNode first = state.isMissingNode() ? decode : state;
        JsonNode m = first.path("machine");
        Machine machine = new Machine(m.path("gpu").asText(""), m.path("driver").asText(""),
                decode.path("machine").path("drafter").asText(""));
        double bandwidth = first.path("copyBandwidthGBs").asDouble(Double.NaN);

        List<StateRow> rows = new ArrayList<>();
        for (JsonNode n : state.path("results")) {
            double median = n.path("medianUs").asDouble(Double.NaN);
            double floor = n.path("floorUs").asDouble(Double.NaN);
            rows.add(new StateRow(n.path("arch").asText("?"), n.path("op").asText("?"), n.path("layout").asText(""),
                    n.path("T").asInt(0), n.path("batch").asInt(0), median, floor,
                    n.path("ratio").asDouble(median / floor), n.path("achievedGBs").asDouble(Double.NaN),
                    n.path("hostBound").asBoolean(false), n.path("checkPassed").asBoolean(true),
                    n.path("sameBytesCopyUs").asDouble(Double.NaN)));
        }
        List<Check> checks = new ArrayList<>();
        for (JsonNode n : state.path("checks")) {
            checks.add(new Check(n.path("arch").asText("?"), n.path("op").asText("?"), n.path("layout").asText(""),
                    n.path("relativeError").asDouble(Double.NaN), n.path("passed").asBoolean(false)));
        }
        List<DecodeRow> decodeRows = new ArrayList<>();
        for (JsonNode n : decode.path("results")) {
            double step = n.path("stepMs").asDouble(Double.NaN);
            double floor = n.path("floorMs").asDouble(Double.NaN);
            decodeRows.add(new DecodeRow(n.path("model").asText("?"), n.path("batch").asInt(0),
                    n.path("mode").asText("?"), n.path("k").asInt(0), n.path("tokensPerSecond").asDouble(Double.NaN),
                    step, n.path("acceptanceRate").asDouble(Double.NaN), floor, n.path("ratio").asDouble(step / floor)));
        }
        String date = state.path("date").asText(decode.path("date").asText(""));
        return new BenchData(machine, date, state.path("quick").asBoolean(false) || decode.path("quick").asBoolean(false),
                bandwidth, rows, checks, decodeRows, problems);
    }

    /** Whether the spot check of this (arch, op, layout) passed (true where none was recorded). */
    boolean checkPassed(StateRow r) {
        return r.checkPassed() && checks.stream().filter(c -> c.arch().equals(r.arch()) && c.op().equals(r.op())
                && c.layout().equals(r.layout())).allMatch(Check::passed);
    }

    private static JsonNode parse(Path file, String what, List<String> problems) {
        if (file == null) {
            return MissingNode.getInstance();
        }
        if (!Files.isRegularFile(file)) {
            problems.add("no " + what + " results: " + file + " does not exist");
            return MissingNode.getInstance();
        }
        try {
            return new ObjectMapper().readTree(file.toFile());
        } catch (IOException e) {
            problems.add("the " + what + " results in " + file + " cannot be read: " + e.getMessage());
            return MissingNode.getInstance();
        }
    }
}
