package dev.thorsdk.harness.android;

import android.content.Context;
import android.content.Intent;
import android.content.IntentFilter;
import android.os.BatteryManager;
import android.os.Build;
import android.os.PowerManager;
import dev.thorsdk.harness.Protocol;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.LinkedHashMap;
import java.util.Map;

/** Device state recorded with every window: battery level and temperature, thermal status, CPU clocks. */
public final class AndroidState implements Protocol.StateSource {
    private final Context context;

    public AndroidState(Context context) {
        this.context = context;
    }

    @Override
    public Map<String, Object> state() {
        Map<String, Object> m = new LinkedHashMap<>();
        Intent i = context.registerReceiver(null, new IntentFilter(Intent.ACTION_BATTERY_CHANGED));
        if (i != null) {
            int level = i.getIntExtra(BatteryManager.EXTRA_LEVEL, -1);
            int scale = i.getIntExtra(BatteryManager.EXTRA_SCALE, -1);
            if (level >= 0 && scale > 0) {
                m.put("battery_pct", 100.0 * level / scale);
            }
            // the charger changes what the battery meter reads and the idle power: the idle baseline's rule
            // (docs/protocol.md) re-measures idle when either changes
            int plugged = i.getIntExtra(BatteryManager.EXTRA_PLUGGED, -1);
            if (plugged >= 0) {
                m.put("plugged", plugged != 0);
            }
            int status = i.getIntExtra(BatteryManager.EXTRA_STATUS, -1);
            if (status >= 0) {
                m.put("charging", status == BatteryManager.BATTERY_STATUS_CHARGING
                        || status == BatteryManager.BATTERY_STATUS_FULL);
            }
            int temp = i.getIntExtra(BatteryManager.EXTRA_TEMPERATURE, Integer.MIN_VALUE);
            if (temp != Integer.MIN_VALUE) {
                m.put("battery_temp_c", temp / 10.0);
            }
        }
        if (Build.VERSION.SDK_INT >= 29) {
            PowerManager pm = (PowerManager) context.getSystemService(Context.POWER_SERVICE);
            m.put("thermal_status", pm.getCurrentThermalStatus());
        }
        Map<String, Object> freqs = new LinkedHashMap<>();
        File[] cpus = new File("/sys/devices/system/cpu").listFiles((d, n) -> n.matches("cpu[0-9]+"));
        if (cpus != null) {
            for (File c : cpus) {
                File f = new File(c, "cpufreq/scaling_cur_freq");
                try {
                    freqs.put(c.getName(), Long.parseLong(
                            new String(Files.readAllBytes(f.toPath()), StandardCharsets.UTF_8).trim()));
                } catch (IOException | NumberFormatException | SecurityException e) {
                    freqs.put(c.getName(), null);  // offline core or not readable: recorded as unknown
                }
            }
        }
        m.put("cpu_khz", freqs);
        return m;
    }
}
