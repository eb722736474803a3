package dev.hyspec.backend.cuda;

import dev.hyspec.backend.ExpertWeights;
import dev.hyspec.backend.Tensor;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.Set;

/**
 * Times the routed expert products at a Qwen3-Next-80B-like MoE layer (512 experts of bf16
 * {@code [512, 2048]} up and {@code [2048, 512]} down weights, top-10) for decode-shaped token
 * counts, in device time of a replayed graph, next to the floor: the bytes of the experts the tokens were routed to at
 * 3.0 TB/s (DESIGN §9). Run on the device: {@code java -cp ... dev.hyspec.backend.cuda.MoeBench}.
 */
final class MoeBench {
    private static final double BANDWIDTH = 3.0e12;

    public static void main(String[] args) {
        int experts = 512;
        int k = 10;
        int d = 2048;
        int inter = 512;
        try (CudaBackend gpu = new CudaBackend(CudaBackend.Precision.BF16)) {
            Tensor[] up = new Tensor[experts];
            Tensor[] down = new Tensor[experts];
            for (int e = 0; e < experts; e++) {
                up[e] = gpu.randomWeight(2L * e, 0f, 0.02f, inter, d);
                down[e] = gpu.randomWeight(2L * e + 1, 0f, 0.02f, d, inter);
            }
            ExpertWeights upW = gpu.expertWeights(up);
            ExpertWeights downW = gpu.expertWeights(down);
            Random r = new Random(1);
            for (int tokens : new int[] {1, 4, 16, 64, 256}) {
                float[] ids = new float[tokens * k];
                Set<Integer> used = new HashSet<>();
                for (int t = 0; t < tokens; t++) {
                    List<Integer> all = new ArrayList<>();
                    for (int e = 0; e < experts; e++) {
                        all.add(e);
                    }
                    Collections.shuffle(all, r);
                    for (int j = 0; j < k; j++) {
                        ids[t * k + j] = all.get(j);
                        used.add(all.get(j));
                    }
                }
                Tensor id = gpu.upload(ids, tokens, k);
                Tensor x = gpu.upload(Gpu.normal(r, tokens * d, 1), tokens, d);
                Tensor h = gpu.zeros(tokens * k, inter);
                Tensor y = gpu.zeros(tokens * k, d);
                double bytes = 2.0 * used.size() * inter * d;
                for (String which : new String[] {"up", "down"}) {
                    Runnable op = which.equals("up") ? () -> gpu.moeExpertMatmul(x, id, upW, h)
                            : () -> gpu.moeExpertMatmul(h, id, downW, y);
                    // as a decode step runs it: recorded, captured on the second round, replayed on the third
                    int reps = 50;
                    EventTimer timer = gpu.timer();
                    for (int round = 0; round < 3; round++) {
                        if (round == 2) {
                            timer.start();
                        }
                        gpu.beginGraph();
                        for (int i = 0; i < reps; i++) {
                            op.run();
                        }
                        gpu.endGraph();
                    }
                    double us = timer.stopMillis() * 1e3 / reps;
                    double floor = bytes / BANDWIDTH * 1e6;
                    System.out.printf(Locale.ROOT,
                            "[bench] moe %-4s E=%d K=%d D=%d I=%d T=%3d (%3d experts used): %8.1f us  floor %7.1f us (%.2fx)%n",
                            which, experts, k, d, inter, tokens, used.size(), us, floor, us / floor);
                }
                for (Tensor t : new Tensor[] {id, x, h, y}) {
                    gpu.free(t);
                }
            }
        }
    }
}
