package dev.thorsdk.harness;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;

/** Battery readings from /sys/class/power_supply under a root folder (a fake tree in tests). */
public final class SysfsBattery implements BatteryReader {
    private final File supplies;
    private final String supply;

    public SysfsBattery(File root, String supply) {
        this.supplies = new File(root, "sys/class/power_supply");
        this.supply = supply;
    }

    static String read(File f) throws IOException {
        return new String(Files.readAllBytes(f.toPath()), StandardCharsets.UTF_8).trim();
    }

    private long number(String leaf) throws IOException {
        File f = new File(new File(supplies, supply), leaf);
        String s = read(f);
        try {
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            throw new IOException(f + " holds '" + s + "', not a number", e);
        }
    }

    @Override
    public long currentRaw() throws IOException {
        return number("current_now");
    }

    @Override
    public long voltageRaw() throws IOException {
        return number("voltage_now");
    }

    @Override
    public String externalPower() throws IOException {
        StringBuilder why = new StringBuilder();
        File status = new File(new File(supplies, supply), "status");
        if (status.isFile()) {
            String s = read(status);
            if (s.equals("Charging") || s.equals("Full") || s.equals("Not charging")) {
                why.append("battery status is '").append(s).append("'");
            }
        }
        File[] all = supplies.listFiles();
        if (all != null) {
            Arrays2.sortByName(all);
            for (File d : all) {
                File online = new File(d, "online");
                if (!d.getName().equals(supply) && online.isFile()) {
                    String v = read(online);
                    if (!v.isEmpty() && !v.equals("0")) {
                        if (why.length() > 0) {
                            why.append(", ");
                        }
                        why.append(d.getName()).append(" power is online");
                    }
                }
            }
        }
        return why.toString();
    }
}
