package dev.hyspec.metrics;

import static io.restassured.RestAssured.given;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** One scrape of {@code /q/metrics}, parsed from the Prometheus text format into samples. */
public final class Exposition {
    /** One sample line: {@code name{labels} value}. */
    record Sample(String name, Map<String, String> labels, double value) {}

    private static final Pattern LINE = Pattern.compile("([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\\{(.*)})?\\s+(\\S+).*");
    private static final Pattern LABEL = Pattern.compile("([a-zA-Z_][a-zA-Z0-9_]*)=\"((?:[^\"\\\\]|\\\\.)*)\"");

    final String text;
    final List<Sample> samples;

    private Exposition(String text, List<Sample> samples) {
        this.text = text;
        this.samples = samples;
    }

    /** Scrapes the running application. */
    public static Exposition scrape() {
        return parse(given().get("/q/metrics").then().statusCode(200).extract().asString());
    }

    static Exposition parse(String text) {
        List<Sample> out = new ArrayList<>();
        for (String line : text.split("\n")) {
            if (line.isBlank() || line.startsWith("#")) {
                continue;
            }
            Matcher m = LINE.matcher(line);
            if (!m.matches()) {
                throw new AssertionError("not a sample line: " + line);
            }
            Map<String, String> labels = new LinkedHashMap<>();
            if (m.group(2) != null) {
                Matcher l = LABEL.matcher(m.group(2));
                while (l.find()) {
                    labels.put(l.group(1), l.group(2));
                }
            }
            out.add(new Sample(m.group(1), labels, Double.parseDouble(m.group(3))));
        }
        return new Exposition(text, out);
    }

    /** The samples named {@code name} whose labels include every {@code key, value} pair given. */
    List<Sample> find(String name, String... labelPairs) {
        List<Sample> out = new ArrayList<>();
        for (Sample s : samples) {
            if (s.name().equals(name) && matches(s.labels(), labelPairs)) {
                out.add(s);
            }
        }
        return out;
    }

    /** The sum of {@link #find}'s samples; 0 when there are none. */
    public double sum(String name, String... labelPairs) {
        return find(name, labelPairs).stream().mapToDouble(Sample::value).sum();
    }

    /** The one sample {@link #find} finds. */
    public double value(String name, String... labelPairs) {
        List<Sample> found = find(name, labelPairs);
        if (found.size() != 1) {
            throw new AssertionError("expected one sample " + name + " " + List.of(labelPairs) + ", found " + found);
        }
        return found.get(0).value();
    }

    private static boolean matches(Map<String, String> labels, String[] pairs) {
        for (int i = 0; i < pairs.length; i += 2) {
            if (!pairs[i + 1].equals(labels.get(pairs[i]))) {
                return false;
            }
        }
        return true;
    }
}
