package dev.hyspec.bench;

import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.awt.FontMetrics;
import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.Stroke;
import java.awt.geom.AffineTransform;
import java.awt.geom.Path2D;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.TreeSet;
import javax.imageio.ImageIO;

/**
 * A line chart written as a PNG with Java2D (headless, no libraries): one line per series over
 * linear or logarithmic axes, dashed lines for floors and references, a legend on the right.
 * The x ticks are the x values the series hold (batch sizes), the y ticks 1-2-5 steps.
 */
final class LineChart {
    /** One line; {@code dashed} for floors. Points with a non-positive value on a log axis are skipped. */
    record Series(String name, Color color, boolean dashed, double[] x, double[] y) {}

    /** A horizontal reference line (a target) at {@code y}. */
    record Reference(String name, double y) {}

    static final Color[] PALETTE = {new Color(0x1f77b4), new Color(0xd62728), new Color(0x2ca02c),
        new Color(0xff7f0e), new Color(0x9467bd), new Color(0x8c564b), new Color(0xe377c2), new Color(0x17becf)};

    private static final int WIDTH = 960;
    private static final int HEIGHT = 600;
    private static final int LEFT = 90;
    private static final int RIGHT = 250;
    private static final int TOP = 50;
    private static final int BOTTOM = 70;

    private final String title;
    private final String xLabel;
    private final String yLabel;
    private final boolean logX;
    private final boolean logY;
    private final List<Series> series = new ArrayList<>();
    private final List<Reference> references = new ArrayList<>();

    LineChart(String title, String xLabel, String yLabel, boolean logX, boolean logY) {
        this.title = title;
        this.xLabel = xLabel;
        this.yLabel = yLabel;
        this.logX = logX;
        this.logY = logY;
    }

    LineChart add(Series s) {
        series.add(s);
        return this;
    }

    LineChart reference(String name, double y) {
        references.add(new Reference(name, y));
        return this;
    }

    boolean isEmpty() {
        return series.stream().allMatch(s -> s.x().length == 0);
    }

    void write(Path png) throws IOException {
        if (System.getProperty("java.awt.headless") == null) {
            System.setProperty("java.awt.headless", "true");
        }
        BufferedImage img = new BufferedImage(WIDTH, HEIGHT, BufferedImage.TYPE_INT_RGB);
        Graphics2D g = img.createGraphics();
        try {
            draw(g);
        } finally {
            g.dispose();
        }
        if (!ImageIO.write(img, "png", png.toFile())) {
            throw new IOException("no PNG writer for " + png);
        }
    }

    private void draw(Graphics2D g) {
        g.setRenderingHint(RenderingHints.KEY_ANTIALIASING, RenderingHints.VALUE_ANTIALIAS_ON);
        g.setRenderingHint(RenderingHints.KEY_TEXT_ANTIALIASING, RenderingHints.VALUE_TEXT_ANTIALIAS_ON);
        g.setColor(Color.WHITE);
        g.fillRect(0, 0, WIDTH, HEIGHT);
        Font font = new Font(Font.SANS_SERIF, Font.PLAIN, 13);
        g.setFont(font.deriveFont(Font.BOLD, 16f));
        g.setColor(Color.BLACK);
        g.drawString(title, LEFT, TOP - 20);
        g.setFont(font);

        TreeSet<Double> xs = new TreeSet<>();
        double yMin = Double.POSITIVE_INFINITY;
        double yMax = Double.NEGATIVE_INFINITY;
        for (Series s : series) {
            for (int i = 0; i < s.x().length; i++) {
                if (usable(s.x()[i], logX) && usable(s.y()[i], logY)) {
                    xs.add(s.x()[i]);
                    yMin = Math.min(yMin, s.y()[i]);
                    yMax = Math.max(yMax, s.y()[i]);
                }
            }
        }
        for (Reference r : references) {
            if (usable(r.y(), logY)) {
                yMin = Math.min(yMin, r.y());
                yMax = Math.max(yMax, r.y());
            }
        }
        int plotW = WIDTH - LEFT - RIGHT;
        int plotH = HEIGHT - TOP - BOTTOM;
        if (xs.isEmpty()) {
            g.setColor(Color.GRAY);
            g.drawRect(LEFT, TOP, plotW, plotH);
            g.drawString("no data", LEFT + plotW / 2 - 20, TOP + plotH / 2);
            return;
        }
        double[] xr = range(xs.first(), xs.last(), logX);
        double[] yr = range(yMin, yMax, logY);
        Axis x = new Axis(xr[0], xr[1], logX, LEFT, LEFT + plotW);
        Axis y = new Axis(yr[0], yr[1], logY, TOP + plotH, TOP);
        FontMetrics fm = g.getFontMetrics();

        // grid and ticks
        Stroke solid = g.getStroke();
        for (double v : xs) {
            int px = x.pixel(v);
            g.setColor(new Color(0xeeeeee));
            g.drawLine(px, TOP, px, TOP + plotH);
            g.setColor(Color.BLACK);
            String label = format(v);
            g.drawString(label, px - fm.stringWidth(label) / 2, TOP + plotH + fm.getAscent() + 6);
        }
        for (double v : yTicks(yr[0], yr[1], logY)) {
            int py = y.pixel(v);
            g.setColor(new Color(0xeeeeee));
            g.drawLine(LEFT, py, LEFT + plotW, py);
            g.setColor(Color.BLACK);
            String label = format(v);
            g.drawString(label, LEFT - 8 - fm.stringWidth(label), py + fm.getAscent() / 2 - 1);
        }
        g.setColor(Color.GRAY);
        g.drawRect(LEFT, TOP, plotW, plotH);
        g.setColor(Color.BLACK);
        g.drawString(xLabel, LEFT + plotW / 2 - fm.stringWidth(xLabel) / 2, HEIGHT - 25);
        AffineTransform saved = g.getTransform();
        g.rotate(-Math.PI / 2);
        g.drawString(yLabel, -(TOP + plotH / 2) - fm.stringWidth(yLabel) / 2, 25);
        g.setTransform(saved);

        // lines
        Stroke dashed = new BasicStroke(2f, BasicStroke.CAP_BUTT, BasicStroke.JOIN_ROUND, 10f, new float[] {7f, 5f}, 0f);
        Stroke line = new BasicStroke(2.2f, BasicStroke.CAP_ROUND, BasicStroke.JOIN_ROUND);
        for (Reference r : references) {
            if (usable(r.y(), logY)) {
                g.setColor(Color.DARK_GRAY);
                g.setStroke(new BasicStroke(1.2f, BasicStroke.CAP_BUTT, BasicStroke.JOIN_ROUND, 10f,
                        new float[] {3f, 4f}, 0f));
                int py = y.pixel(r.y());
                g.drawLine(LEFT, py, LEFT + plotW, py);
                g.setStroke(solid);
                g.drawString(r.name(), LEFT + 6, py - 4);
            }
        }
        for (Series s : series) {
            Path2D.Double path = new Path2D.Double();
            boolean started = false;
            g.setColor(s.color());
            for (int i : order(s.x())) {
                if (!usable(s.x()[i], logX) || !usable(s.y()[i], logY)) {
                    continue;
                }
                int px = x.pixel(s.x()[i]);
                int py = y.pixel(s.y()[i]);
                if (started) {
                    path.lineTo(px, py);
                } else {
                    path.moveTo(px, py);
                    started = true;
                }
                if (!s.dashed()) {
                    g.fillOval(px - 4, py - 4, 8, 8);
                }
            }
            g.setStroke(s.dashed() ? dashed : line);
            g.draw(path);
            g.setStroke(solid);
        }

        // legend
        int lx = LEFT + plotW + 20;
        int ly = TOP + 10;
        for (Series s : series) {
            g.setColor(s.color());
            g.setStroke(s.dashed() ? dashed : line);
            g.drawLine(lx, ly, lx + 30, ly);
            g.setStroke(solid);
            g.setColor(Color.BLACK);
            g.drawString(s.name(), lx + 38, ly + fm.getAscent() / 2 - 1);
            ly += fm.getHeight() + 6;
        }
    }

    private static boolean usable(double v, boolean log) {
        return Double.isFinite(v) && (!log || v > 0);
    }

    private static int[] order(double[] x) {
        Integer[] idx = new Integer[x.length];
        for (int i = 0; i < x.length; i++) {
            idx[i] = i;
        }
        Arrays.sort(idx, (a, b) -> Double.compare(x[a], x[b]));
        int[] out = new int[x.length];
        for (int i = 0; i < x.length; i++) {
            out[i] = idx[i];
        }
        return out;
    }

    /** The axis span: padded a little, to whole 1-2-5 steps on a log axis, from zero on a linear one. */
    private static double[] range(double lo, double hi, boolean log) {
        if (log) {
            if (lo == hi) {
                return new double[] {lo / 2, hi * 2};
            }
            double pad = Math.pow(hi / lo, 0.06);
            return new double[] {lo / pad, hi * pad};
        }
        double min = Math.min(0, lo);
        double max = hi == min ? min + 1 : hi;
        return new double[] {min, max + (max - min) * 0.08};
    }

    private static List<Double> yTicks(double lo, double hi, boolean log) {
        List<Double> out = new ArrayList<>();
        if (log) {
            int decades = (int) Math.ceil(Math.log10(hi / lo));
            double[] steps = decades > 4 ? new double[] {1} : decades > 2 ? new double[] {1, 3} : new double[] {1, 2, 5};
            for (int e = (int) Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
                for (double m : steps) {
                    double v = m * Math.pow(10, e);
                    if (v >= lo && v <= hi) {
                        out.add(v);
                    }
                }
            }
            return out;
        }
        double raw = (hi - lo) / 6;
        double mag = Math.pow(10, Math.floor(Math.log10(raw)));
        double step = raw / mag < 1.5 ? mag : raw / mag < 3.5 ? 2 * mag : raw / mag < 7.5 ? 5 * mag : 10 * mag;
        for (double v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
            out.add(Math.abs(v) < step * 1e-9 ? 0 : v);
        }
        return out;
    }

    private static String format(double v) {
        if (v == Math.rint(v) && Math.abs(v) < 1e7) {
            return String.format(Locale.ROOT, "%d", (long) v);
        }
        if (Math.abs(v) >= 1e7 || Math.abs(v) < 1e-3) {
            return String.format(Locale.ROOT, "%.0e", v);
        }
        return String.format(Locale.ROOT, "%.3g", v).replaceAll("\\.?0+$", "");
    }

    /** Data to pixel along one axis. */
    private record Axis(double lo, double hi, boolean log, int from, int to) {
        int pixel(double v) {
            double f = log ? Math.log(v / lo) / Math.log(hi / lo) : (v - lo) / (hi - lo);
            return (int) Math.round(from + f * (to - from));
        }
    }
}
