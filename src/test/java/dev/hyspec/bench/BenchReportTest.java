package dev.hyspec.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.bench.BenchTargets.Target;
import dev.hyspec.bench.BenchTargets.Verdict;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** BenchReport on small synthetic results: the tables, the plots, and each DESIGN §10 target judged. */
class BenchReportTest {
    @TempDir
    Path dir;

    /** Replay at 1.1× its floor from batch 32 up (1.6× at batch 8), 4× faster than intermediate-copy. */
    private static String stateJson(boolean failedCheck) {
        StringBuilder r = new StringBuilder();
        for (int t : new int[] {1, 4}) {
            for (int batch : new int[] {8, 64, 256}) {
                double floor = 2.8 * batch * (1 + 0.01 * t);
                double replay = floor * (batch >= 32 ? 1.1 : 1.6);
                String vk = row("mamba2", "replay", "VK", t, batch, replay, floor);
                if (batch == 256) {   // a device copy of the same bytes beside it
                    vk = vk.substring(0, vk.length() - 1) + String.format(Locale.ROOT, ",\"sameBytesCopyUs\":%.3f}",
                            floor * 1.02);
                }
                r.append(vk).append(',')
                        .append(row("mamba2", "replay", "KV", t, batch, replay * 1.2, floor)).append(',')
                        .append(row("mamba2", "intermediate-copy", "VK", t, batch, replay * 4, floor * (3 + t)))
                        .append(',')
                        .append(row("gdn", "replay", "KV", t, batch, replay / 2, floor / 2)).append(',');
            }
        }
        r.append(row("mamba2", "decode", "VK", 1, 8, 30, 25));
        return """
                {"machine": {"gpu": "NVIDIA H100 80GB HBM3", "driver": "550.54.15, CUDA 12.4"},
                 "date": "2025-01-02T03:04:05Z", "copyBandwidthGBs": 2950.0,
                 "results": [%s],
                 "checks": [{"arch": "mamba2", "op": "replay", "layout": "VK", "relativeError": %s, "passed": %s},
                            {"arch": "gdn", "op": "replay", "layout": "KV", "relativeError": 2e-7, "passed": true}]}
                """.formatted(r, failedCheck ? "0.5" : "3e-7", !failedCheck);
    }

    private static String row(String arch, String op, String layout, int t, int batch, double median, double floor) {
        return String.format(Locale.ROOT, "{\"arch\":\"%s\",\"op\":\"%s\",\"layout\":\"%s\",\"T\":%d,\"batch\":%d,"
                + "\"medianUs\":%.3f,\"floorUs\":%.3f,\"ratio\":%.4f,\"achievedGBs\":%.1f}", arch, op, layout, t, batch,
                median, floor, median / floor, 2950 * floor / median);
    }

    /** Batch-1 step 1.2× its floor; replay 2.0× no-spec at batch 1 (best k) but only 1.1× intermediate-copy at 64. */
    private static final String DECODE = """
            {"machine": {"gpu": "NVIDIA H100 80GB HBM3", "driver": "550.54.15"}, "copyBandwidthGBs": 2950.0,
             "results": [
              {"model": "nemotron-h-8b", "batch": 1, "mode": "no-spec", "k": 0, "tokensPerSecond": 100.0,
               "stepMs": 10.0, "acceptanceRate": null, "weightBytes": 16000000000, "floorMs": 8.3333, "ratio": 1.2},
              {"model": "nemotron-h-8b", "batch": 1, "mode": "replay", "k": 2, "tokensPerSecond": 150.0,
               "stepMs": 11.0, "acceptanceRate": 0.7, "weightBytes": 16000000000, "floorMs": 8.3333, "ratio": 1.32},
              {"model": "nemotron-h-8b", "batch": 1, "mode": "replay", "k": 4, "tokensPerSecond": 200.0,
               "stepMs": 12.0, "acceptanceRate": 0.6, "weightBytes": 16000000000, "floorMs": 8.3333, "ratio": 1.44},
              {"model": "nemotron-h-8b", "batch": 64, "mode": "replay", "k": 4, "tokensPerSecond": 2200.0,
               "stepMs": 20.0, "acceptanceRate": 0.6, "weightBytes": 16000000000, "floorMs": 9.0, "ratio": 2.2},
              {"model": "nemotron-h-8b", "batch": 64, "mode": "intermediate-copy", "k": 4, "tokensPerSecond": 2000.0,
               "stepMs": 22.0, "acceptanceRate": 0.6, "weightBytes": 16000000000, "floorMs": 9.0, "ratio": 2.4},
              {"model": "nemotron-h-8b", "batch": 64, "mode": "no-spec", "k": 0, "tokensPerSecond": 1500.0,
               "stepMs": 42.0, "acceptanceRate": null, "weightBytes": 16000000000, "floorMs": 9.0, "ratio": 4.6},
              {"model": "qwen3.5-9b", "batch": 1, "mode": "no-spec", "k": 0, "tokensPerSecond": 90.0,
               "stepMs": 11.1, "weightBytes": 18000000000, "floorMs": 9.0, "ratio": 1.23}
             ]}
            """;

    private Path file(String name, String json) throws IOException {
        Path p = dir.resolve(name);
        Files.writeString(p, json);
        return p;
    }

    @Test
    void writesTablesPlotsAndJudgesEveryTarget() throws IOException {
        Path out = dir.resolve("report");
        List<Target> targets = BenchReport.write(file("state-update.json", stateJson(false)), file("decode.json", DECODE),
                out);

        assertEquals(List.of(Verdict.MET, Verdict.MET, Verdict.MET, Verdict.MET, Verdict.MISSED, Verdict.MET),
                targets.stream().map(Target::verdict).toList(), targets.toString());
        assertTrue(targets.get(0).measured().contains("1.10×"), targets.get(0).measured());
        assertTrue(targets.get(1).measured().contains("4.00×"), targets.get(1).measured());
        assertTrue(targets.get(3).measured().startsWith("2.00×"), targets.get(3).measured());   // best k (4) vs no-spec
        assertTrue(targets.get(4).measured().startsWith("1.10×"), targets.get(4).measured());

        String md = Files.readString(out.resolve("BENCHMARKS.md"));
        assertTrue(md.contains("NVIDIA H100 80GB HBM3") && md.contains("2950 GB/s"), md);
        assertTrue(md.contains("scripts/device/bench.sh run"), "reproduce commands");
        assertTrue(md.contains("| replay | VK | 4 | 64 |"), "state table row");
        assertTrue(md.contains("copy of the same bytes") && md.contains("= 1.02× floor; replay = 1.08× that copy"),
                "the same-bytes copy beside the batch-256 replay rows");
        assertTrue(md.contains("| 4.00× |"), "replay speed-up column");
        assertTrue(md.contains("| nemotron-h-8b | replay | 4 | 1 | 200.0 |"), "decode table row");
        for (String png : List.of("state-mamba2-T1.png", "state-mamba2-T4.png", "state-gdn-T4.png",
                "speedup-mamba2.png", "decode-nemotron-h-8b.png", "decode-qwen3.5-9b.png")) {
            BufferedImage img = ImageIO.read(out.resolve(png).toFile());
            assertNotNull(img, png);
            assertTrue(img.getWidth() > 100 && img.getHeight() > 100, png);
            assertTrue(md.contains("](" + png + ")"), png + " is linked");
        }
    }

    @Test
    void failedCorrectnessCheckMissesTheTargetsOfItsOperation() throws IOException {
        List<Target> targets = BenchReport.write(file("state-update.json", stateJson(true)), null, dir.resolve("r"));
        assertEquals(Verdict.MISSED, targets.get(0).verdict());
        assertEquals(Verdict.MISSED, targets.get(1).verdict());
        assertTrue(targets.get(0).measured().contains("correctness check"), targets.get(0).measured());
        assertTrue(Files.readString(dir.resolve("r/BENCHMARKS.md")).contains("**correctness check failed**"));
    }

    @Test
    void missingFilesLeaveTargetsNotMeasured() throws IOException {
        Path out = dir.resolve("empty");
        List<Target> targets = BenchReport.write(dir.resolve("absent.json"), null, out);
        assertTrue(targets.stream().allMatch(t -> t.verdict() == Verdict.NOT_MEASURED), targets.toString());
        String md = Files.readString(out.resolve("BENCHMARKS.md"));
        assertTrue(md.contains("absent.json does not exist"), md);
        assertTrue(md.contains("Not measured."), md);
        try (var files = Files.list(out)) {
            assertFalse(files.anyMatch(p -> p.toString().endsWith(".png")), "no plots without data");
        }
    }

    @Test
    void unreadableFileIsReportedNotThrown() throws IOException {
        List<Target> targets = BenchReport.write(file("broken.json", "{ not json"), file("decode.json", DECODE),
                dir.resolve("b"));
        assertEquals(Verdict.NOT_MEASURED, targets.get(0).verdict());
        assertEquals(Verdict.MET, targets.get(2).verdict());
        assertTrue(Files.readString(dir.resolve("b/BENCHMARKS.md")).contains("cannot be read"));
    }
}
